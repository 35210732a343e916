// AdamW's update loop compiled twice, for baseline x86-64 and for AVX2
// (vectorize.h), and split between threads; the bits of the plain loop in
// nn/optim.cpp, which calls it when the fast kernels are on (dispatch.h).
// Private. Tests: tests/test_kernels.cpp.
#pragma once

#include <cstdint>

namespace ember::internal {

// The scalars of one step, each already in the parameter's dtype.
template <typename T>
struct AdamWScalars {
    T decay; // 1 - lr * weight_decay
    T beta1, one_minus_beta1;
    T beta2, one_minus_beta2;
    T bias_correction2_sqrt;
    T eps;
    T neg_step_size; // -lr / bias_correction1
};

// One step over n elements: param, exp_avg and exp_avg_sq updated in place.
void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const AdamWScalars<float>& s);
void adamw_update(double* param, const double* grad, double* exp_avg, double* exp_avg_sq, int64_t n,
                  const AdamWScalars<double>& s);

} // namespace ember::internal
