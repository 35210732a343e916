// error_function(x): erf(x), the one GELU (its exact form) and its gradient use.
//
// For float32 it is ember's own, for the reason exponential.h gives for e^x:
// glibc's erff is one call per element, with branches on the range of x, and
// GELU's erf cost a training step of nanoGPT's model more than all its
// LayerNorms, softmaxes and AdamW put together. This one has no branch, no
// table and no call, so a loop of it vectorises (PyTorch's GELU likewise uses
// a vectorised erf, Sleef's). For double it is std::erf.
// Tests: tests/test_exponential.cpp (within 1 ulp of the correctly rounded erf,
// and equal to it for about 97% of floats).
#pragma once

#include <cmath>
#include <type_traits>

#include "core/loops/exponential.h"

namespace ember::internal {

// erf(x) for float32, in two pieces, both computed and one kept (a branch
// would stop the loop vectorising). The coefficients are least-squares fits
// made by erf_fit.py beside this file.
//
//   |x| < 0.875: erf is odd, so erf(x) = x P(x^2) with P(0) = 2/sqrt(pi).
//                It is computed as x + x (P(t) - 1): the leading x is exact,
//                and the rounding of the small rest hardly shows.
//   |x| >= 0.875: erf(x) = sign(x) (1 - erfc(a)), a = |x|, where
//                erfc(a) = e^(-a^2 + g(a)) and g(a) = ln erfc(a) + a^2 is
//                smooth enough for a polynomial in a - 2.4. The rounding of
//                a^2 moves erfc by a relative 2^-24 a^2 at most, and erfc is
//                tiny wherever that is large. a is clamped to 4: erfc(3.92)
//                is below half a float's step at 1, so erf rounds to exactly
//                1 from there on, infinities included. NaN passes through.
//
// Each piece is a function of its own, so that a loop over many elements can
// take them one step at a time (gelu_erf_loop in core/ops/gelu.h says why);
// erf_float is the three in a row.

// The piece for |x| < 0.875: x P(x^2), as x + x (P(t) - 1).
inline float erf_near_zero(float x) {
    const float t = x * x;
    float p = 8.67110139e-05f;
    p = p * t - 0.000821010908f;
    p = p * t + 0.00520666083f;
    p = p * t - 0.0268615503f;
    p = p * t + 0.112837322f;
    p = p * t - 0.376126349f;
    p = p * t + 0.128379166f;
    return x + x * p;
}

// The exponent of the other piece: erfc(a) = e^(g(a) - a^2), a = |x| clamped to 4.
inline float erfc_exponent(float x) {
    const float abs_x = x < 0 ? -x : x;
    const float a = abs_x > 4.0f ? 4.0f : abs_x;
    const float s = a - 2.4f;
    float g = -5.84618292e-08f;
    g = g * s + 3.22714383e-10f;
    g = g * s + 1.96584551e-06f;
    g = g * s - 1.45798613e-05f;
    g = g * s + 8.64174654e-05f;
    g = g * s - 0.000469544f;
    g = g * s + 0.00238796766f;
    g = g * s - 0.0117681129f;
    g = g * s + 0.059497945f;
    g = g * s - 0.364236593f;
    g = g * s - 1.52097511f;
    return g - a * a;
}

// erf(x) from the two pieces: near_zero = erf_near_zero(x) and
// erfc_abs = e^erfc_exponent(x), which is erfc(|x|).
inline float erf_from_pieces(float x, float near_zero, float erfc_abs) {
    const float abs_x = x < 0 ? -x : x;
    const float tail = 1.0f - erfc_abs;
    const float far = x < 0 ? -tail : tail;
    return abs_x < 0.875f ? near_zero : far;
}

inline float erf_float(float x) { return erf_from_pieces(x, erf_near_zero(x), exp_float(erfc_exponent(x))); }

template <typename T>
T error_function(T x) {
    if constexpr (std::is_same_v<T, float>) return erf_float(x);
    else return std::erf(x);
}

} // namespace ember::internal
