// Helpers shared by the random fills (distributions.cpp, normal.cpp,
// multinomial.cpp) and their fast kernels. Private; defined in fill.cpp.
//
// PyTorch fills a tensor one element at a time in *memory* order: its
// TensorIterator puts the dimension with the largest stride outermost. So a
// transposed view receives its draws in the order of the buffer under it, not
// in the order its indices suggest. for_each_in_memory_order walks the same
// way. Fills are serial on purpose: every draw depends on the one before.
// Tests: tests/test_random.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/loops/map.h"
#include "core/random/generator.h"
#include "core/tensor/shape.h"

namespace ember::internal {

// The generator an op draws from: `generator`, or the default one when
// null. An op that draws holds its mutex() for all of its draws (one line
// after this call, as every op in core/random/ does), so that threads may
// share the generator.
inline Generator& generator_or_default(Generator* generator) {
    return generator != nullptr ? *generator : default_generator();
}

// t's dimensions ordered largest stride first, ties kept in index order:
// the nesting of PyTorch's loops over t, outermost first.
Shape memory_order(const Tensor& t);

// True when t's elements occupy a gap-free block, each at its own address,
// in some order of its dimensions (a permuted contiguous tensor).
bool is_non_overlapping_and_dense(const Tensor& t);

// PyTorch's empty_like with the default preserve_format: a fresh tensor of
// like's shape and `dtype`, with like's strides when like is dense and
// non-overlapping (so a transposed input gives a transposed result), else
// contiguous. randn_like, rand_like and multinomial's noise use it, because
// the strides decide the order of the draws. `op` names the caller in errors.
Tensor empty_preserving_layout(const Tensor& like, DType dtype, const char* op);

// rand and randn: a fresh tensor of `shape` in options' dtype (float32
// unless it says float64), filled by fill(out) (uniform_, normal_), and
// requiring grad if options say so. `op` names the caller in errors.
template <typename Fill>
Tensor random_tensor(const char* op, const Shape& shape, TensorOptions options, const Fill& fill) {
    check_sizes(shape, op);
    const DType dtype = options.dtype_or(kFloat32);
    if (!is_floating(dtype))
        fail<DTypeError>(op, "makes float32 or float64 tensors, asked for ", dtype_name(dtype), " of shape ", shape);
    Tensor out = empty_for(op, shape, dtype);
    fill(out);
    if (options.requires_grad()) out.requires_grad_(true);
    return out;
}

// rand_like and randn_like: a fresh tensor like `other` (its dtype, and its
// strides when dense: empty_preserving_layout), filled by fill(out).
template <typename Fill>
Tensor random_tensor_like(const char* op, const Tensor& other, const Fill& fill) {
    check_floating(other, op);
    Tensor out = empty_preserving_layout(other, other.dtype(), op);
    fill(out);
    return out;
}

// The checks every in-place fill makes before drawing: autograd allows the
// write, and no two elements share a memory location (an expanded tensor).
void check_fill_target(const Tensor& t, const char* op);

// After a fill: bump the storage version (saved copies of t are now stale)
// and, like fill_, give t in the graph a node that passes back zero gradient
// (its values no longer depend on its past), named as PyTorch names it.
void finish_fill(const Tensor& t, const char* grad_name);

// A Bernoulli draw with probability p takes one u53 (two words, the first
// the high half) and succeeds when u53 * 2^-53 < p. Scaling by 2^53 is
// exact, so that is the integer test u53 < bernoulli_threshold(p) =
// ceil(p * 2^53): the same outcome without a conversion.
inline uint64_t bernoulli_threshold(double p) { return static_cast<uint64_t>(std::ceil(p * 0x1p53)); }

// Calls f(x) with a reference to each element x of t (C++ type T), in memory
// order.
template <typename T, typename F>
void for_each_in_memory_order(const Tensor& t, F&& f) {
    Shape shape, strides;
    for (int64_t d : memory_order(t)) {
        shape.push_back(t.shape()[d]);
        strides.push_back(t.strides()[d]);
    }
    StridedLayout<1> layout(shape, {&strides});
    T* data = data_of<T>(t);
    for_each_run(layout, 0, t.numel(), [&](const auto& off, const auto& step, int64_t n) {
        for (int64_t i = 0; i < n; ++i) f(data[off[0] + i * step[0]]);
    });
}

} // namespace ember::internal
