// LayerNorm, fast (fast::layer_norm_forward and _backward, dispatch.h): the
// functions of core/ops/layer_norm.h, which define the result, visited in
// another order of rows and columns, so the two give the same bits.
// Tests: tests/test_kernels.cpp.
//
// Rows go in blocks of 16, the statistics of every row of a block first and
// then its outputs. A row's statistics are a chain of dependent steps (a sum,
// a division, a second sum, a square root, a division); with short rows
// (C = 32 at the tiny size) that chain, not the arithmetic, set the pace when
// each row ran start to finish. Kept apart, the chains of neighbouring rows
// overlap in the CPU. The weight and bias gradients, sums over rows, are
// split between threads by columns. All of it is compiled for AVX2 too
// (vectorize.h): its arithmetic in double then takes 4 lanes a vector, not 2.
#include "core/ops/layer_norm.h"

#include <algorithm>

#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"

namespace ember::internal {

namespace {

constexpr int64_t kRowBlock = 16;

// Rows [begin, end) of the forward, compiled for AVX2 too; flatten inlines
// the shared loops into each copy.
template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void forward_rows(const T* x, const T* weight, const T* bias, double eps,
                                                       int64_t begin, int64_t end, int64_t n, T* y, double* mean,
                                                       double* rstd) {
    for (int64_t r0 = begin; r0 < end; r0 += kRowBlock) {
        const int64_t r1 = std::min(end, r0 + kRowBlock);
        for (int64_t r = r0; r < r1; ++r) mean[r] = row_mean(x + r * n, n);
        for (int64_t r = r0; r < r1; ++r) rstd[r] = row_variance(x + r * n, n, mean[r]); // the variance, for now
        for (int64_t r = r0; r < r1; ++r) rstd[r] = rstd_of(rstd[r], eps);
        for (int64_t r = r0; r < r1; ++r) normalize_row(x + r * n, weight, bias, n, mean[r], rstd[r], y + r * n);
    }
}

// Rows [begin, end) of dx, compiled for AVX2 too.
template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void dx_rows(const T* dout, const T* x, const T* weight, const double* mean,
                                                  const double* rstd, int64_t begin, int64_t end, int64_t n, T* dx) {
    DxhatMeans means[kRowBlock];
    for (int64_t r0 = begin; r0 < end; r0 += kRowBlock) {
        const int64_t r1 = std::min(end, r0 + kRowBlock);
        for (int64_t r = r0; r < r1; ++r)
            means[r - r0] = dxhat_means(dout + r * n, x + r * n, weight, n, mean[r], rstd[r]);
        for (int64_t r = r0; r < r1; ++r)
            dx_row(dout + r * n, x + r * n, weight, n, mean[r], rstd[r], means[r - r0], dx + r * n);
    }
}

// The columns [begin, end) of dweight and dbias, compiled for AVX2 too.
template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void columns(const T* dout, const T* x, const double* mean, const double* rstd,
                                                  int64_t rows, int64_t n, int64_t begin, int64_t end, T* dweight,
                                                  T* dbias) {
    dweight_dbias_columns(dout, x, mean, rstd, rows, n, begin, end, dweight, dbias);
}

} // namespace

template <typename T>
void fast::layer_norm_forward(const T* x, const T* weight, const T* bias, double eps, int64_t rows, int64_t n, T* y,
                              double* mean, double* rstd) {
    parallel_for(0, rows, grain_for(n),
                 [&](int64_t begin, int64_t end) { forward_rows(x, weight, bias, eps, begin, end, n, y, mean, rstd); });
}
template void fast::layer_norm_forward(const float*, const float*, const float*, double, int64_t, int64_t, float*,
                                       double*, double*);
template void fast::layer_norm_forward(const double*, const double*, const double*, double, int64_t, int64_t, double*,
                                       double*, double*);

template <typename T>
void fast::layer_norm_backward(const T* dout, const T* x, const T* weight, const double* mean, const double* rstd,
                               int64_t rows, int64_t n, T* dx, T* dweight, T* dbias) {
    if (dx)
        parallel_for(0, rows, grain_for(n),
                     [&](int64_t begin, int64_t end) { dx_rows(dout, x, weight, mean, rstd, begin, end, n, dx); });
    // Each thread owns a range of columns and walks the rows in order, so
    // every sum runs over r in increasing order whatever the thread count,
    // and the inner loop reads contiguous memory.
    if (dweight || dbias)
        parallel_for(0, n, grain_for(rows), [&](int64_t begin, int64_t end) {
            columns(dout, x, mean, rstd, rows, n, begin, end, dweight, dbias);
        });
}
template void fast::layer_norm_backward(const float*, const float*, const float*, const double*, const double*, int64_t,
                                        int64_t, float*, float*, float*);
template void fast::layer_norm_backward(const double*, const double*, const double*, const double*, const double*,
                                        int64_t, int64_t, double*, double*, double*);

} // namespace ember::internal
