// split's backward without its copy (fast::split_gradient_whole,
// dispatch.h): when the pieces' gradients already lie side by side in one
// buffer, as the pieces lie in x, x's gradient is that buffer seen whole.
// FlashAttention hands out dq, dk and dv so when q, k and v are cut from one
// projection (kernels/flash_attention.cpp, gradients_like), which is how the
// fast model's attention splits its qkv. Tests: tests/test_kernels.cpp.
#include "core/kernels/dispatch.h"
#include "core/random/fill.h"
#include "core/tensor/internal.h"

namespace ember::internal {

Tensor fast::split_gradient_whole(const std::vector<Tensor>& douts, const Shape& sizes, int64_t d, const Shape& x_shape,
                                  DType dtype) {
    if (douts.empty() || douts.size() != sizes.size()) return {};
    const Tensor& first = douts[0];
    int64_t start = 0;
    for (size_t i = 0; i < douts.size(); ++i) {
        const Tensor& g = douts[i];
        // Piece i of the whole: the same storage and strides as the first,
        // its shape with sizes[i] along d, starting start_i steps along d
        // from where the first starts.
        if (!g.defined() || g.dtype() != dtype || g.storage() != first.storage() || g.strides() != first.strides() ||
            g.dim() != static_cast<int64_t>(x_shape.size()))
            return {};
        for (int64_t k = 0; k < g.dim(); ++k)
            if (g.shape()[k] != (k == d ? sizes[i] : x_shape[k])) return {};
        if (g.storage_offset() != first.storage_offset() + start * first.strides()[d]) return {};
        start += sizes[i];
    }
    // Every element of the whole is an element of one piece; no two of its
    // indices may share one element, as a copy's would not.
    Tensor whole = make_view(first, x_shape, first.strides(), first.storage_offset());
    return is_non_overlapping_and_dense(whole) ? whole : Tensor();
}

} // namespace ember::internal
