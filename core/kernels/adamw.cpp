// AdamW's update, compiled for AVX2 too: see adamw.h. The loop is that of
// nn/optim.cpp, operation for operation. Tests: tests/test_kernels.cpp.
#include "core/kernels/adamw.h"

#include <cmath>

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

template <typename T>
void split(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWScalars<T>& s) {
    parallel_for(0, n, kElementwiseGrain,
                 [&](int64_t b, int64_t e) { update(param + b, grad + b, m + b, v + b, e - b, s); });
}

} // namespace

void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const AdamWScalars<float>& s) {
    split(param, grad, exp_avg, exp_avg_sq, n, s);
}
void adamw_update(double* param, const double* grad, double* exp_avg, double* exp_avg_sq, int64_t n,
                  const AdamWScalars<double>& s) {
    split(param, grad, exp_avg, exp_avg_sq, n, s);
}

} // namespace ember::internal
