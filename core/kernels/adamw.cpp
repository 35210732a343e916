// AdamW's update, fast (fast::adamw_update, dispatch.h): the loop that
// defines it (core/ops/adamw.h), compiled for baseline x86-64 and for AVX2
// (vectorize.h) and split between threads. Tests: tests/test_kernels.cpp.
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

} // namespace

template <typename T>
void fast::adamw_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n, const AdamWScalars<T>& s) {
    parallel_for(0, n, kElementwiseGrain,
                 [&](int64_t b, int64_t e) { update(param + b, grad + b, exp_avg + b, exp_avg_sq + b, e - b, s); });
}
template void fast::adamw_update(float*, const float*, float*, float*, int64_t, const AdamWScalars<float>&);
template void fast::adamw_update(double*, const double*, double*, double*, int64_t, const AdamWScalars<double>&);

} // namespace ember::internal
