// Dropout's mask as bits, as the fast paths keep it (kernels/dropout.cpp,
// kernels/flash_attention.cpp): a 32nd of the float mask the definition
// (core/ops/dropout.cpp) multiplies by. Private to core/kernels/.
// Tests: tests/test_kernels.cpp.
#pragma once

#include <cstdint>

#include "core/random/generator.h"
#include "core/tensor/tensor.h"

namespace ember::internal {

// Bit i of words (int64 words, bit i % 64 of word i / 64) is 1 where
// element i is kept: the draws of the definition's bernoulli_(1 - p) over n
// elements in row-major order, so the same generator state keeps the same
// elements. scale is what a kept element is multiplied by, 1 / (1 - p)
// computed in `dtype`, as the definition's noise.div_(1 - p) computes it.
// p = 1 draws nothing and keeps nothing.
struct DropoutBits {
    Tensor words;
    double scale = 1;
};
DropoutBits draw_dropout_bits(int64_t n, double p, DType dtype, Generator* generator);

} // namespace ember::internal
