// What the reductions share (reduce.cpp: sum, mean, var; extrema.cpp: max,
// min, argmax, argmin): how reducing some dims splits a tensor, and the
// loop that folds each output's reduced elements. Private.
// Tests: tests/test_reduce.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/loops/iter.h"
#include "core/loops/map.h"
#include "core/loops/parallel.h"
#include "core/tensor/tensor.h"

namespace ember::internal {

// How reducing `dims` of a tensor splits it.
struct ReduceGeometry {
    Shape kept_shape, kept_strides;       // one output element per index of these
    Shape reduced_shape, reduced_strides; // folded into each output element
    Shape out_shape;                      // kept_shape, with 1s in place when keepdim
    Shape keepdim_shape;                  // out_shape as if keepdim were true
    int64_t outer = 1, inner = 1;         // numel of the kept and of the reduced dims
};

// `dims` empty means every dim, as in PyTorch; a dim named twice, or out
// of range, is an error naming `op` and x's shape.
ReduceGeometry reduce_geometry(const Tensor& x, const Shape& dims, bool keepdim, const char* op);

// Elements per chunk of a one-output reduction (fixed, for determinism).
inline constexpr int64_t kChunk = 16384;

// Folds the reduced elements of every output element: acc = fold(acc, value,
// index) in order, index counting the reduced elements from 0; partial folds
// of one output are combined with merge; store(o, acc) writes output o.
template <typename T, typename Acc, typename Fold, typename Merge, typename Store>
void fold_reduced(const Tensor& x, const ReduceGeometry& g, Acc init, Fold fold, Merge merge, Store store) {
    const T* data = data_of<T>(x);
    StridedLayout<1> inner_layout(g.reduced_shape, {&g.reduced_strides});
    auto fold_range = [&](const T* base, int64_t begin, int64_t end) {
        Acc acc = init;
        int64_t pos = begin;
        for_each_run(inner_layout, begin, end, [&](const auto& off, const auto& step, int64_t n) {
            const T* p = base + off[0];
            for (int64_t i = 0; i < n; ++i) acc = fold(acc, p[i * step[0]], pos + i);
            pos += n;
        });
        return acc;
    };

    if (g.outer == 1 && g.inner > kChunk) {
        int64_t nchunks = (g.inner + kChunk - 1) / kChunk;
        std::vector<Acc> partial(nchunks, init);
        parallel_for(0, nchunks, grain_for(kChunk), [&](int64_t b, int64_t e) {
            for (int64_t c = b; c < e; ++c)
                partial[c] = fold_range(data, c * kChunk, std::min(g.inner, (c + 1) * kChunk));
        });
        Acc acc = partial[0];
        for (int64_t c = 1; c < nchunks; ++c) acc = merge(acc, partial[c]);
        store(0, acc);
        return;
    }
    parallel_for(0, g.outer, grain_for(g.inner), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
            // Output o's first reduced element: o over the kept dims.
            store(o, fold_range(data + offset_of(o, g.kept_shape, g.kept_strides), 0, g.inner));
        }
    });
}

} // namespace ember::internal
