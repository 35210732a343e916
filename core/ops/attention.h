// What scaled_dot_product_attention's definition (attention.cpp) and its
// fast kernel (core/kernels/flash_attention.cpp) share: the call, checked
// and described once. Private. Tests: tests/test_sdpa.cpp.
#pragma once

#include <cstdint>

#include "core/tensor/tensor.h"

namespace ember::internal {

// How the scores are masked: not at all; the causal mask (key j hidden from
// query i when j > i); a bool mask, `allowed` (true where a query may attend
// to a key); or a float mask added to the scores.
enum class AttentionMask { none, causal, allowed, additive };

// Shapes: q (..., L, E), k (..., S, E), v (..., S, Ev) -> out (..., L, Ev),
// with the leading dims broadcast to `batch`.
struct AttentionCall {
    Shape batch;
    int64_t L = 0, S = 0, E = 0, Ev = 0;
    double scale = 1;
    AttentionMask mask_kind = AttentionMask::none;
    Tensor mask; // the op's `allowed`, bool or of q's dtype, or undefined
    double dropout_p = 0;
};

} // namespace ember::internal
