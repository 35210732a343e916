// exponential(x): e^x, the one exponential every kernel of ember uses (exp,
// sigmoid, softmax, log_softmax, cross_entropy, gelu's gradient), so fused
// ops and the ops they fuse keep agreeing bit for bit.
//
// For float32 it is ember's own, written so that a loop of it vectorises: no
// branch, no table, no call into libm. glibc's expf is one call per element;
// this one runs 4 floats per SSE2 instruction, or 8 in an AVX2 build
// (docs/performance.md has what that was worth). PyTorch's CPU kernels likewise
// use their own vectorised exp (Sleef's, within 1 ulp), not libm's. For
// double it is std::exp. Tests: tests/test_exponential.cpp.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace ember::internal {

// e^x for float32, within 1 ulp of the correctly rounded result (and equal
// to it for all but about 0.4% of floats: tests/test_exponential.cpp):
//
//   x = k ln2 + r, k = round(x / ln2), |r| <= ln2/2
//   e^x = 2^k * e^r
//
// r is computed with ln2 in two parts (Cody and Waite's reduction): k * kLn2Hi
// is exact, since kLn2Hi has 9 significant bits and |k| <= 150, so r carries
// no error but the last part's. e^r is its Taylor series to r^7 (the next
// term, r^8/8!, is below 2^-27 for |r| <= ln2/2), summed as 1 + (r + r^2 q)
// so that the final add rounds once. 2^k is applied as two halves, each a
// normal float built from its exponent bits; the first product is exact, so
// the second rounds once, and makes the subnormal results and the overflow to
// infinity correctly. Inputs are first clamped to [-104, 89], outside which
// the result is 0 or infinity anyway: -inf gives 0 (a masked softmax entry
// contributes exactly nothing), +inf gives inf, and NaN stays NaN (the
// comparisons are false for it, so the clamp lets it through).
inline float exp_float(float x) {
    constexpr float kLog2e = 1.44269504088896341f; // 1 / ln 2
    constexpr float kLn2Hi = 0.693359375f;         // 355/512
    constexpr float kLn2Lo = -2.12194440e-4f;      // ln 2 - kLn2Hi
    constexpr float kRound = 12582912.0f;          // 1.5 * 2^23: adding it rounds to an integer
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    // k = round(x / ln2): the sum's low bits hold k, and subtracting undoes the shift.
    const float shifted = x * kLog2e + kRound;
    const float k = shifted - kRound;
    const float r = (x - k * kLn2Hi) - k * kLn2Lo;
    // e^r = 1 + r + r^2 q, q = 1/2! + r/3! + ... + r^5/7!, by Horner's rule.
    float q = 1.0f / 5040;
    q = q * r + 1.0f / 720;
    q = q * r + 1.0f / 120;
    q = q * r + 1.0f / 24;
    q = q * r + 1.0f / 6;
    q = q * r + 0.5f;
    const float p = (q * (r * r) + r) + 1.0f;
    // 2^k = 2^half * 2^(k - half), each with its exponent field set to the power + 127.
    const int32_t ki = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound); // in [-150, 128]
    const int32_t half = ki >> 1;
    const float s1 = std::bit_cast<float>(static_cast<uint32_t>(half + 127) << 23);
    const float s2 = std::bit_cast<float>(static_cast<uint32_t>(ki - half + 127) << 23);
    return p * s1 * s2;
}

template <typename T>
T exponential(T x) {
    if constexpr (std::is_same_v<T, float>) return exp_float(x);
    else return std::exp(x);
}

// sum_i e^(x_i - m) over the n elements x[0], x[stride], ..., in double,
// added in order of i; each e^(x_i - m) is also stored to out[i * stride]
// when out is given (out may be x). The exponentials go through a buffer in
// chunks, a loop with nothing else in it, which the compiler vectorises.
template <typename T>
double sum_exp(const T* x, int64_t stride, int64_t n, T m, T* out = nullptr) {
    constexpr int64_t kChunk = 256;
    T e[kChunk];
    double sum = 0;
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
        const int64_t len = std::min(kChunk, n - i0);
        for (int64_t i = 0; i < len; ++i) e[i] = x[(i0 + i) * stride] - m;
        for (int64_t i = 0; i < len; ++i) e[i] = exponential(e[i]);
        for (int64_t i = 0; i < len; ++i) sum += e[i];
        if (out)
            for (int64_t i = 0; i < len; ++i) out[(i0 + i) * stride] = e[i];
    }
    return sum;
}

} // namespace ember::internal
