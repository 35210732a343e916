// The loop that defines AdamW's update of one parameter (nn/optim.cpp's
// AdamW::step runs it): included there and by the fast copy
// (core/kernels/adamw.cpp), which runs this same function on slices of a
// step's parameters, taken end to end, in several threads, so the two give
// the same bits. Private.
// Tests: tests/test_optim.cpp, tests/test_kernels.cpp.
#pragma once

#include <cmath>
#include <cstdint>

namespace ember::internal {

// The scalars of one AdamW step, each already in the parameter's dtype.
template <typename T>
struct AdamWScalars {
    T decay; // 1 - lr * weight_decay
    T beta1, one_minus_beta1;
    T beta2, one_minus_beta2;
    T bias_correction2_sqrt;
    T eps;
    T neg_step_size; // -lr / bias_correction1
};

// n elements of param, m (exp_avg) and v (exp_avg_sq) updated in place from
// grad: PyTorch's single-tensor loop, one element at a time, each line one
// of its tensor ops. __restrict__: the four arrays do not overlap, so a
// compiler may vectorise.
template <typename T>
inline void adamw_update_loop(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ m, T* __restrict__ v,
                              int64_t n, const AdamWScalars<T>& s) {
    for (int64_t j = 0; j < n; ++j) {
        param[j] = param[j] * s.decay;                                   // param.mul_(1 - lr * wd)
        m[j] = m[j] * s.beta1 + grad[j] * s.one_minus_beta1;             // exp_avg.mul_(b1).add_(g, alpha=1-b1)
        v[j] = v[j] * s.beta2 + (grad[j] * grad[j]) * s.one_minus_beta2; // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
        T denom = std::sqrt(v[j]) / s.bias_correction2_sqrt + s.eps;     // (v.sqrt() / bc2_sqrt).add_(eps)
        param[j] = param[j] + s.neg_step_size * (m[j] / denom);          // param.addcdiv_(m, denom, -step_size)
    }
}

// One parameter's arrays and scalars for one step: what adamw_update_loop
// takes, kept so that a step can update every parameter in one pass
// (AdamW::step, fast::adamw_update_all).
template <typename T>
struct AdamWSlice {
    T* param;
    const T* grad;
    T *exp_avg, *exp_avg_sq;
    int64_t n;
    AdamWScalars<T> scalars;
};

} // namespace ember::internal
