// Walking strided tensors: the loop under every element-wise kernel. Private.
//
// Several operands (an output and its inputs) are visited in lockstep over one
// shape, each with its own strides; a broadcast input simply has stride 0 in
// the broadcast dimensions. Dimensions that are contiguous in every operand
// are merged first, so a contiguous tensor becomes one long run. The kernel
// sees runs: the element offsets of a run's first element in each operand, the
// operands' strides along the run, and its length. offset_of answers the
// one-element question: where the element with a given row-major index
// lies. docs/tensor.md explains strides; tests/test_tensor.cpp checks every
// visited offset, and the op tests cover the broadcast and strided cases.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "core/loops/parallel.h"
#include "core/tensor/error.h"

namespace ember::internal {

// Calls visit(d, i_d) with the coordinates of the element whose row-major
// linear index over `shape` is `index`, from the last dim to the first: the
// index read as a number whose digits are the coordinates, the last dim's
// the fastest.
template <typename F>
void unravel(int64_t index, std::span<const int64_t> shape, const F& visit) {
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
        visit(d, index % shape[d]);
        index /= shape[d];
    }
}

// The offset of that element in a tensor of `shape` with `strides` (stride
// 0 along broadcast dims): sum_d i_d * strides[d].
inline int64_t offset_of(int64_t index, std::span<const int64_t> shape, std::span<const int64_t> strides) {
    int64_t offset = 0;
    unravel(index, shape, [&](int64_t d, int64_t i) { offset += i * strides[d]; });
    return offset;
}

// One shape seen through N sets of strides, with mergeable dimensions merged.
template <size_t N>
struct StridedLayout {
    Shape shape;
    std::array<Shape, N> strides;

    StridedLayout(const Shape& full_shape, const std::array<const Shape*, N>& full_strides) {
        // Drop size-1 dimensions (they never advance), then merge dimension d
        // into the one before it when, in every operand, stepping the outer
        // dimension once equals stepping the inner one size[d] times.
        for (size_t d = 0; d < full_shape.size(); ++d) {
            if (full_shape[d] == 1) continue;
            bool merge = !shape.empty();
            for (size_t k = 0; k < N && merge; ++k) merge = strides[k].back() == (*full_strides[k])[d] * full_shape[d];
            if (merge) {
                shape.back() *= full_shape[d];
                for (size_t k = 0; k < N; ++k) strides[k].back() = (*full_strides[k])[d];
            } else {
                shape.push_back(full_shape[d]);
                for (size_t k = 0; k < N; ++k) strides[k].push_back((*full_strides[k])[d]);
            }
        }
        if (shape.empty()) { // a single element
            shape.push_back(1);
            for (size_t k = 0; k < N; ++k) strides[k].push_back(0);
        }
    }
};

// Calls run(offsets, steps, n) for the elements with row-major linear indices
// in [begin, end): offsets[k] is the first element's offset in operand k,
// steps[k] operand k's stride along the run, n the run's length.
template <size_t N, typename F>
void for_each_run(const StridedLayout<N>& layout, int64_t begin, int64_t end, const F& run) {
    if (begin >= end) return; // also covers empty tensors, whose shape holds a 0
    const Shape& shape = layout.shape;
    const int64_t ndim = static_cast<int64_t>(shape.size());
    const int64_t inner = shape[ndim - 1];

    // Decompose `begin` into a multi-index and the matching offsets.
    Shape index(ndim, 0);
    std::array<int64_t, N> offsets{};
    unravel(begin, shape, [&](int64_t d, int64_t i) {
        index[d] = i;
        for (size_t k = 0; k < N; ++k) offsets[k] += i * layout.strides[k][d];
    });
    std::array<int64_t, N> steps;
    for (size_t k = 0; k < N; ++k) steps[k] = layout.strides[k][ndim - 1];

    int64_t pos = begin;
    while (pos < end) {
        // Whole runs one after another along the next dim out (the rows of
        // a transposed view's copy, say): a plain loop, no odometer.
        if (ndim >= 2 && index[ndim - 1] == 0 && end - pos >= 2 * inner) {
            const int64_t count = std::min(shape[ndim - 2] - index[ndim - 2], (end - pos) / inner);
            for (int64_t r = 0; r < count; ++r) {
                run(offsets, steps, inner);
                for (size_t k = 0; k < N; ++k) offsets[k] += layout.strides[k][ndim - 2];
            }
            pos += count * inner;
            index[ndim - 2] += count;
            for (int64_t d = ndim - 2; d > 0 && index[d] == shape[d]; --d) {
                index[d] = 0;
                ++index[d - 1];
                for (size_t k = 0; k < N; ++k) offsets[k] += layout.strides[k][d - 1] - shape[d] * layout.strides[k][d];
            }
            continue;
        }
        int64_t n = std::min(inner - index[ndim - 1], end - pos);
        run(offsets, steps, n);
        pos += n;
        // Advance the multi-index by n along the last dimension, carrying
        // into the outer dimensions like an odometer.
        index[ndim - 1] += n;
        for (size_t k = 0; k < N; ++k) offsets[k] += n * steps[k];
        for (int64_t d = ndim - 1; d > 0 && index[d] == shape[d]; --d) {
            index[d] = 0;
            ++index[d - 1];
            for (size_t k = 0; k < N; ++k) offsets[k] += layout.strides[k][d - 1] - shape[d] * layout.strides[k][d];
        }
    }
}

// for_each_run over all `numel` elements, split across threads when large.
template <size_t N, typename F>
void parallel_for_each_run(const StridedLayout<N>& layout, int64_t numel, const F& run) {
    parallel_for(0, numel, kElementwiseGrain,
                 [&](int64_t begin, int64_t end) { for_each_run(layout, begin, end, run); });
}

} // namespace ember::internal
