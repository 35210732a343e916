// GELU's two forms and their derivatives, one element at a time: the
// definition core/ops/unary.cpp's gelu maps over a tensor, included there
// and by the fast copy of the exact form (core/kernels/gelu.cpp), which runs
// these same functions compiled for AVX2 and AVX-512 and split between
// threads, so the two give the same bits. Private.
// Tests: tests/test_unary.cpp (against PyTorch), tests/test_kernels.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "core/loops/erf.h"
#include "core/loops/exponential.h"

namespace ember::internal {

// The exact form: gelu(x) = x * Phi(x) with Phi the normal CDF,
// Phi(x) = (1 + erf(x / sqrt 2)) / 2, so gelu'(x) = Phi(x) + x * phi(x) with
// phi(x) = e^(-x^2/2) / sqrt(2 pi) the normal density. erf is ember's own
// (core/loops/erf.h), so that a loop of these vectorises. Both are written
// from e = erf(x / sqrt 2), so that a loop computing the two together
// (gelu_erf_loop_with_slope) computes e once and gives the same bits.
template <typename T>
T gelu_erf_argument(T x) {
    return x * T(std::numbers::sqrt2 / 2); // x / sqrt 2
}
template <typename T>
T gelu_erf_of(T x) {
    return error_function(gelu_erf_argument(x));
}
template <typename T>
T gelu_erf_from(T x, T e) {
    return x * T(0.5) * (T(1) + e);
}
template <typename T>
T gelu_erf_grad_from(T x, T e) {
    const T alpha = T(1 / std::sqrt(2 * std::numbers::pi)); // 1/sqrt(2 pi)
    T cdf = T(0.5) * (T(1) + e);
    T pdf = alpha * exponential(T(-0.5) * x * x);
    return cdf + x * pdf;
}
template <typename T>
T gelu_erf(T x) {
    return gelu_erf_from(x, gelu_erf_of(x));
}
template <typename T>
T gelu_erf_grad(T x) {
    return gelu_erf_grad_from(x, gelu_erf_of(x));
}

// The tanh form (GPT-2's): gelu(x) ~ x/2 * (1 + tanh(u)), u = beta (x + kappa x^3),
// beta = sqrt(2/pi), kappa = 0.044715. Its derivative, by the product rule:
// (1 + tanh u)/2 + x/2 * (1 - tanh^2 u) * beta (1 + 3 kappa x^2).
template <typename T>
T gelu_tanh(T x) {
    const T beta = T(std::numbers::sqrt2 * std::numbers::inv_sqrtpi); // sqrt(2/pi)
    const T kappa = T(0.044715);
    T inner = beta * (x + kappa * (x * x * x));
    return T(0.5) * x * (T(1) + std::tanh(inner));
}
template <typename T>
T gelu_tanh_grad(T x) {
    const T beta = T(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
    const T kappa = T(0.044715);
    T x_sq = x * x;
    T inner = beta * (x + kappa * (x_sq * x));
    T tanh_inner = std::tanh(inner);
    T left_derivative = T(0.5) * (T(1) + tanh_inner);
    T right_derivative = T(0.5) * x * (T(1) - tanh_inner * tanh_inner);
    T inner_derivative = beta * (T(1) + T(3) * kappa * x_sq);
    return left_derivative + right_derivative * inner_derivative;
}

// The exact form over n contiguous elements: out = gelu(x); and, for a
// forward that will be differentiated, the slope gelu'(x) too, from the
// same erf (gelu's backward is then dx = dout * slope). __restrict__: the
// arrays do not overlap.
//
// The loops take kGeluBlock elements at a time through each step of the
// erf (erf.h's pieces), not one element through all of them. Each step is
// a chain of dependent multiplies and adds (a Horner polynomial, an
// exponential), and a loop whose body is a whole erf, about 130
// instructions a vector, keeps the core waiting on that chain: the next
// vector's chain begins too far on for the core to start it early. A step
// at a time, the 4 vectors of a block (16 floats each with AVX-512, 8 with
// AVX2: 8 vectors) are independent chains side by side. Each element goes
// through the same operations in the same order as gelu_erf and
// gelu_erf_grad, so the bits are theirs (tests/test_kernels.cpp). The
// forward alone ran about a quarter faster for it, with its slope about a
// tenth (docs/performance.md, ember_bench's gelu_ entries).
constexpr int64_t kGeluBlock = 64;

// Elements [0, n) of a block, n <= kGeluBlock; slope may be null.
inline void gelu_erf_block(const float* __restrict__ x, float* __restrict__ out, float* __restrict__ slope, int64_t n) {
    float u[kGeluBlock], near_zero[kGeluBlock], e[kGeluBlock];
    for (int64_t i = 0; i < n; ++i) u[i] = gelu_erf_argument(x[i]);
    for (int64_t i = 0; i < n; ++i) near_zero[i] = erf_near_zero(u[i]);
    for (int64_t i = 0; i < n; ++i) e[i] = erfc_exponent(u[i]);
    for (int64_t i = 0; i < n; ++i) e[i] = exp_float(e[i]);
    for (int64_t i = 0; i < n; ++i) e[i] = erf_from_pieces(u[i], near_zero[i], e[i]); // erf(x / sqrt 2)
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_erf_from(x[i], e[i]);
    if (slope)
        for (int64_t i = 0; i < n; ++i) slope[i] = gelu_erf_grad_from(x[i], e[i]);
}

inline void gelu_erf_loop(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    for (int64_t i = 0; i < n; i += kGeluBlock) gelu_erf_block(x + i, out + i, nullptr, std::min(kGeluBlock, n - i));
}
inline void gelu_erf_loop_with_slope(const float* __restrict__ x, float* __restrict__ out, float* __restrict__ slope,
                                     int64_t n) {
    for (int64_t i = 0; i < n; i += kGeluBlock) gelu_erf_block(x + i, out + i, slope + i, std::min(kGeluBlock, n - i));
}

} // namespace ember::internal
