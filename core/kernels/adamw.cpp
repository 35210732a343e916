// AdamW's update, fast (fast::adamw_update_all, dispatch.h): the loop that
// defines it (core/ops/adamw.h), compiled for baseline x86-64 and for AVX2
// (vectorize.h), over every parameter of a step in one parallel loop. The
// threads split the parameters' elements taken end to end, as if they were
// one array, so a small parameter (a LayerNorm's 128 weights) costs no
// parallel region of its own and no thread waits while another updates it
// alone. Each element's update is the loop's: the same bits, however the
// elements are split. Tests: tests/test_kernels.cpp, tests/test_optim.cpp.
#include <algorithm>
#include <atomic>

#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"

namespace ember::internal {

namespace {

// The loop must be inlined into the marked function (flatten): a lambda
// handed to parallel_for would be compiled for the baseline only.
template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void update(T* param, const T* grad, T* m, T* v, int64_t n, AdamWScalars<T> s) {
    adamw_update_loop(param, grad, m, v, n, s);
}

std::atomic<int64_t> runs{0};

} // namespace

int64_t fast::adamw_update_all_runs() { return runs.load(std::memory_order_relaxed); }

template <typename T>
void fast::adamw_update_all(const std::vector<AdamWSlice<T>>& slices) {
    runs.fetch_add(1, std::memory_order_relaxed);
    // start[i]: where slice i begins among all the elements end to end.
    std::vector<int64_t> start(slices.size() + 1, 0);
    for (size_t i = 0; i < slices.size(); ++i) start[i + 1] = start[i] + slices[i].n;
    parallel_for(0, start.back(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        // The slices that [b, e) meets, from the last one to start at or before b.
        auto i = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
        for (; i < slices.size() && start[i] < e; ++i) {
            const AdamWSlice<T>& s = slices[i];
            const int64_t from = std::max(b, start[i]) - start[i], to = std::min(e, start[i + 1]) - start[i];
            if (from < to)
                update(s.param + from, s.grad + from, s.exp_avg + from, s.exp_avg_sq + from, to - from, s.scalars);
        }
    });
}
template void fast::adamw_update_all(const std::vector<AdamWSlice<float>>&);
template void fast::adamw_update_all(const std::vector<AdamWSlice<double>>&);

} // namespace ember::internal
