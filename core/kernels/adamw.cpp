// AdamW's update, fast (fast::adamw_update, dispatch.h): the loop of
// nn/optim.cpp, operation for operation, compiled for baseline x86-64 and
// for AVX2 (vectorize.h) and split between threads. Tests:
// tests/test_kernels.cpp.
#include <cmath>

#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"

namespace ember::internal {

namespace {

// The loop sits in the marked function itself: a lambda handed to
// parallel_for would be compiled for the baseline only. __restrict__ tells
// the compiler the four arrays do not overlap, so it may vectorise.
template <typename T>
EMBER_VECTOR_CLONES void update(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ m, T* __restrict__ v,
                                int64_t n, AdamWScalars<T> s) {
    for (int64_t j = 0; j < n; ++j) {
        param[j] = param[j] * s.decay;
        m[j] = m[j] * s.beta1 + grad[j] * s.one_minus_beta1;
        v[j] = v[j] * s.beta2 + (grad[j] * grad[j]) * s.one_minus_beta2;
        T denom = std::sqrt(v[j]) / s.bias_correction2_sqrt + s.eps;
        param[j] = param[j] + s.neg_step_size * (m[j] / denom);
    }
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
