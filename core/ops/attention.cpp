// scaled_dot_product_attention: PyTorch 2's F.scaled_dot_product_attention.
// Its definition, below, is the composition PyTorch's documentation gives,
//   out = dropout(softmax(q @ k^T * scale + mask)) @ v,
// in ember's ops, whose backward passes give its gradient. With the fast
// kernels on it runs FlashAttention instead (core/kernels/flash_attention.cpp):
// the same result up to rounding, without storing the (L,S) weights, and
// dropping the same weights for the same generator state.
// docs/flash_attention.md derives both; tests/test_sdpa.cpp checks the op
// against PyTorch and the unfused ops, tests/test_kernels.cpp the fast
// kernel against this definition.
#include <cmath>
#include <limits>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/ops/attention.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::AttentionCall;
using internal::AttentionMask;
using internal::check_floating;

namespace {

// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev), the leading
// dims broadcast by matmul.
Tensor definition(const AttentionCall& c, const Tensor& q, const Tensor& k, const Tensor& v, Generator* generator) {
    Tensor scores = matmul(q, k.transpose(-2, -1)) * c.scale; // (..., L, S)
    const double neg_inf = -std::numeric_limits<double>::infinity();
    switch (c.mask_kind) {
    case AttentionMask::none: break;
    case AttentionMask::causal: // the keys after each query: j > i
        scores = masked_fill(scores, tril(ones({c.L, c.S})) == 0, neg_inf);
        break;
    case AttentionMask::allowed: scores = masked_fill(scores, c.mask == false, neg_inf); break;
    case AttentionMask::additive: scores = scores + c.mask; break;
    }
    Tensor weights = softmax(scores, -1);
    if (c.dropout_p > 0) weights = dropout(weights, c.dropout_p, true, generator);
    return matmul(weights, v);
}

} // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& allowed,
                                    double dropout_p, bool is_causal, std::optional<double> scale,
                                    Generator* generator) {
    const char* name = "scaled_dot_product_attention";
    if (query.dim() < 2 || key.dim() < 2 || value.dim() < 2)
        fail<ShapeError>(name, "query, key and value need at least 2 dims (..., L, E), got ", query.shape(), ", ",
                         key.shape(), " and ", value.shape());
    check_floating(query, name, "query");
    if (key.dtype() != query.dtype() || value.dtype() != query.dtype())
        fail<DTypeError>(name, "query, key and value must have one dtype, got ", dtype_name(query.dtype()), " ",
                         query.shape(), ", ", dtype_name(key.dtype()), " ", key.shape(), " and ",
                         dtype_name(value.dtype()), " ", value.shape());
    if (key.size(-1) != query.size(-1) || value.size(-2) != key.size(-2))
        fail<ShapeError>(name, "expects query (..., L, E), key (..., S, E) and value (..., S, Ev), got ", query.shape(),
                         ", ", key.shape(), " and ", value.shape());
    if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
        fail<ValueError>(name, "dropout_p must be between 0 and 1, got ", dropout_p);
    AttentionCall c;
    c.L = query.size(-2), c.S = key.size(-2), c.E = query.size(-1), c.Ev = value.size(-1);
    const auto leading = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
    c.batch = broadcast_shapes(broadcast_shapes(leading(query), leading(key), name), leading(value), name);
    Shape weights_shape = c.batch; // (..., L, S), the shape a mask must broadcast to
    weights_shape.push_back(c.L);
    weights_shape.push_back(c.S);
    check_sizes(weights_shape, name); // (..., L, S) of views (expand) may claim more elements than exist
    if (allowed.defined()) {
        if (is_causal)
            fail<ValueError>(name, "takes a mask (allowed) or is_causal, not both (mask ", allowed.shape(), ")");
        if (allowed.dtype() != kBool && allowed.dtype() != query.dtype())
            fail<DTypeError>(name, "the mask (allowed) must be bool or of query's dtype ", dtype_name(query.dtype()),
                             ", got ", dtype_name(allowed.dtype()), " ", allowed.shape());
        if (broadcast_shapes(allowed.shape(), weights_shape, name) != weights_shape)
            fail<ShapeError>(name, "the mask (allowed) ", allowed.shape(), " does not broadcast to the weights' shape ",
                             weights_shape, " (query ", query.shape(), ", key ", key.shape(), ")");
        if (allowed.requires_grad())
            fail<ValueError>(name, "does not compute a gradient for the mask (allowed); pass it detached");
        c.mask = allowed;
        c.mask_kind = allowed.dtype() == kBool ? AttentionMask::allowed : AttentionMask::additive;
    } else if (is_causal) {
        c.mask_kind = AttentionMask::causal;
    }
    c.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(c.E));
    c.dropout_p = dropout_p;

    if constexpr (internal::kFastKernelsBuilt) {
        if (internal::use_fast_kernels())
            return internal::fast::scaled_dot_product_attention(c, query, key, value, generator);
    }
    return definition(c, query, key, value, generator);
}

} // namespace ember
