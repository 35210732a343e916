// GELU's exact form, fast (fast::gelu_erf, fast::gelu_erf_with_slope,
// dispatch.h): the loops that define it (core/ops/gelu.h), compiled for
// baseline x86-64, AVX2 and AVX-512 (vectorize.h) and split between
// threads. ember's erf has no branch, so each copy runs 4, 8 or 16 elements
// at a time (docs/performance.md). Tests: tests/test_kernels.cpp.
#include "core/ops/gelu.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"

namespace ember::internal {

namespace {

// The loops must be inlined into the marked functions (flatten): a lambda
// handed to parallel_for would be compiled for the baseline only.
[[gnu::flatten]] EMBER_VECTOR_CLONES_512 void forward_slice(const float* x, float* out, int64_t n) {
    gelu_erf_loop(x, out, n);
}
[[gnu::flatten]] EMBER_VECTOR_CLONES_512 void forward_slice_with_slope(const float* x, float* out, float* slope,
                                                                       int64_t n) {
    gelu_erf_loop_with_slope(x, out, slope, n);
}

} // namespace

void fast::gelu_erf(const float* x, float* out, int64_t n) {
    parallel_for(0, n, grain_for(16), [&](int64_t b, int64_t e) { forward_slice(x + b, out + b, e - b); });
}

void fast::gelu_erf_with_slope(const float* x, float* out, float* slope, int64_t n) {
    parallel_for(0, n, grain_for(24),
                 [&](int64_t b, int64_t e) { forward_slice_with_slope(x + b, out + b, slope + b, e - b); });
}

} // namespace ember::internal
