#!/usr/bin/python3
"""Fits the coefficients of ember's float erf (core/loops/erf.h).

    python3 core/loops/erf_fit.py

Needs numpy. Prints the two coefficient lists erf.h holds, and the worst
error, in units in the last place of the correctly rounded erf, of a float
model of erf.h's evaluation over 300,000 points of [0, 4] (math.exp stands
in for exp_float, which is within 1 ulp of it; tests/test_exponential.cpp
measures the real thing). Least squares on Chebyshev nodes, in double:

  |x| < 0.875: erf(x) / x as a polynomial P of degree 6 in t = x^2,
               weighted by its inverse (relative error); erf.h
               holds P - 1 and computes x + x (P(t) - 1);
  |x| >= 0.875: log(erfc(a)) + a^2 as a polynomial of degree 10 in
               a - 2.4 on [0.875, 4], where a = |x|.
"""
import math

import numpy as np

SPLIT, SMALL_DEGREE, LARGE_DEGREE, CENTER, TOP = 0.875, 6, 10, 2.4, 4.0


def nodes(lo, hi, n):
    return lo + (np.cos(np.pi * (np.arange(n) + 0.5) / n) + 1) / 2 * (hi - lo)


def fit():
    t = nodes(0.0, SPLIT * SPLIT, 2000)
    small = np.array([math.erf(math.sqrt(v)) / math.sqrt(v) for v in t])
    a = nodes(SPLIT, TOP, 3000)
    large = np.array([math.log(math.erfc(v)) + v * v for v in a])
    small_fit = np.polyfit(t, small, SMALL_DEGREE, w=1 / small)
    small_fit[-1] -= 1  # erf.h adds the leading x itself
    return small_fit.astype(np.float32), np.polyfit(a - CENTER, large, LARGE_DEGREE).astype(np.float32)


def horner(coefficients, x):
    r = coefficients[0]
    for c in coefficients[1:]:
        r = np.float32(r * x + c)
    return r


def model(x, small, large):
    """erf.h's evaluation, rounding to float32 where it does."""
    x = np.float32(x)
    a = np.float32(abs(x))
    if a < SPLIT:  # x + x * (P(t) - 1): the leading x is exact
        return np.float32(x + np.float32(x * horner(small, np.float32(x * x))))
    a = min(a, np.float32(TOP))
    h = np.float32(np.float32(-a * a) + horner(large, np.float32(a - np.float32(CENTER))))
    r = np.float32(1 - np.float32(math.exp(float(h))))
    return r if x > 0 else -r


def main():
    small, large = fit()
    worst, where = 0.0, 0.0
    for x in np.concatenate([np.linspace(0, TOP, 200001), np.linspace(0, SPLIT, 100001)]).astype(np.float32):
        ref = math.erf(float(x))
        ulp = float(np.spacing(np.float32(abs(ref)))) if ref else 1e-45
        err = abs(float(model(x, small, large)) - ref) / ulp
        if err > worst:
            worst, where = err, float(x)
    print("small (highest power first, constant term less 1):", ", ".join("%.9gf" % c for c in small))
    print("large (highest power first):", ", ".join("%.9gf" % c for c in large))
    print("worst error %.3f ulp at x = %.9g" % (worst, where))


if __name__ == "__main__":
    main()
