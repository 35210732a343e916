// cross_entropy's rows, fast (fast::cross_entropy_forward and _backward,
// dispatch.h): the loops of core/ops/cross_entropy.h themselves, included
// here and compiled for baseline x86-64 and for AVX2 (vectorize.h), so the
// two are one source and give the same bits, with the rows split between
// threads: each row's lse and gradient are its own, and the loss's sum
// over the rows is still added in row order, on the calling thread.
// Tests: tests/test_kernels.cpp.
#include "core/ops/cross_entropy.h"

#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"

namespace ember::internal {

namespace {

// flatten: the row loops are inlined into each copy, so that the AVX2 copy
// runs them in AVX2.
template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void lse_rows(const T* x, int64_t n, int64_t c, double* lse) {
    cross_entropy_lse_rows(x, n, c, lse);
}

template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void backward(const T* x, const int64_t* targets, int64_t n, int64_t c,
                                                   int64_t ignore_index, const double* lse, double scale, T* dx) {
    cross_entropy_backward_rows(x, targets, n, c, ignore_index, lse, scale, dx);
}

// An exponential costs some ten element-wise operations (kElementwiseGrain
// counts those).
constexpr int64_t kRowCost = 10;

} // namespace

template <typename T>
double fast::cross_entropy_forward(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                   double* lse) {
    parallel_for(0, n, grain_for(c * kRowCost), [&](int64_t b, int64_t e) { lse_rows(x + b * c, e - b, c, lse + b); });
    return cross_entropy_total(x, targets, n, c, ignore_index, lse);
}
template double fast::cross_entropy_forward(const float*, const int64_t*, int64_t, int64_t, int64_t, double*);
template double fast::cross_entropy_forward(const double*, const int64_t*, int64_t, int64_t, int64_t, double*);

template <typename T>
void fast::cross_entropy_backward(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                  const double* lse, double scale, T* dx) {
    parallel_for(0, n, grain_for(c * kRowCost), [&](int64_t b, int64_t e) {
        backward(x + b * c, targets + b, e - b, c, ignore_index, lse + b, scale, dx + b * c);
    });
}
template void fast::cross_entropy_backward(const float*, const int64_t*, int64_t, int64_t, int64_t, const double*,
                                           double, float*);
template void fast::cross_entropy_backward(const double*, const int64_t*, int64_t, int64_t, int64_t, const double*,
                                           double, double*);

} // namespace ember::internal
