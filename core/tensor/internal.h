// Helpers shared by ember's own files (core/, nn/): not part of the public
// API, never installed. Everything private to ember lives in namespace
// ember::internal; core/README.md lists the private headers.
// Tests: tests/test_tensor.cpp, tests/test_errors.cpp.
#pragma once

#include "core/tensor/tensor.h"

namespace ember::internal {

// A fresh contiguous tensor of `shape` and `dtype` for `op`'s result:
// empty(shape, dtype), with errors naming `op` (a negative or impossibly
// large shape, or an OutOfMemoryError when the machine cannot hold it).
Tensor empty_for(const char* op, const Shape& shape, DType dtype);

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

// Refuses to write in place to a tensor with two indices on one element (an
// expanded tensor: stride 0 along a dim of size > 1), as PyTorch does: the
// result would depend on the order of the writes, and threads would race.
void check_writable(const Tensor& t, const char* op);

// `src` if it cannot alias `dst`, else a private copy of it: an in-place op
// that reads src while writing dst must not see its own writes.
Tensor unaliased(const Tensor& src, const Tensor& dst);

// Throws a DTypeError unless t is float32 or float64, naming the op, what t
// is to it ("the input", "logits", ...), t's dtype and its shape.
void check_floating(const Tensor& t, const char* op, const char* what = "the input");

// Raises the storage version of an in-place op's target (see SavedTensor).
inline void bump_version(const Tensor& t) { t.storage()->bump_version(); }

} // namespace ember::internal
