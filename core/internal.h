// Helpers shared by ember's .cpp files; not part of the public API (the
// umbrella header does not include this file).
#pragma once

#include "tensor.h"

namespace ember::internal {

// A new tensor over `base`'s storage with the given geometry. Views of views
// remember the tensor that owns the storage, as PyTorch's ._base does.
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);

// dst[i] = src[i] for every element, converting dtype; src must already have
// dst's shape (broadcast it first). No autograd, no version bump.
void copy_elements(const Tensor& dst, const Tensor& src);

// The strides that read `t` as if expanded to `shape` (which t must broadcast
// to): 0 in the dims t lacks or has as size 1. No view is made, so no autograd.
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// `t` as `dtype`: t itself when it already is, else a converted copy. No
// autograd: for kernels whose op records its own backward.
Tensor converted(const Tensor& t, DType dtype);

// `t` if contiguous, else a contiguous copy. No autograd.
Tensor contiguous_data(const Tensor& t);

// The positions of a tensor seen as (outer, size, inner) around one dim: for
// ops that work along `dim` (softmax, cat, index_select), in element units of
// a contiguous tensor of that shape.
struct DimSplit {
    int64_t outer = 1, size = 1, inner = 1;
};
DimSplit split_at(const Shape& shape, int64_t dim);

// Raises the storage version of an in-place op's target (see SavedTensor).
inline void bump_version(const Tensor& t) { t.storage()->bump_version(); }

} // namespace ember::internal
