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
// overlap in the CPU. The weight and bias gradients, sums over rows, go in
// two parts on two threads when dx is computed too (Note [LayerNorm's
// backward on two threads]), and are otherwise split between threads by
// columns. All of it is compiled for AVX2 too (vectorize.h): its
// arithmetic in double then takes 4 lanes a vector, not 2.
#include "core/ops/layer_norm.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"

namespace ember::internal {

namespace {

constexpr int64_t kRowBlock = 16;

std::atomic<int64_t> two_part_backwards{0}; // backward_in_two_parts's runs (for the tests)

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

// Rows [r0, r1) added to the running sums of every column, sw and sb
// (add_to_column_sums), compiled for AVX2 too.
template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void column_sums(const T* dout, const T* x, const double* mean, const double* rstd,
                                                      int64_t r0, int64_t r1, int64_t n, double* sw, double* sb) {
    add_to_column_sums(dout, x, mean, rstd, r0, r1, n, 0, n, sw, sb);
}

// Note [LayerNorm's backward on two threads]. dx is a row of its own per
// row, and each thread computes the rows it computed in the forward, in
// its own core's cache. dweight and dbias sum over all the rows: split by
// columns, each thread reads every row, half of them from the other core
// (slow where the host put the two cores far apart). So with dx to
// compute as well, the sums go in two parts: thread 0 adds its own rows to
// the running sums of every column, then computes its rows of dx; thread
// 1 computes its rows of dx, then (by then thread 0's part is done, since
// the sums cost less than dx) continues the same sums over its own rows.
// Whichever thread is done first then helps with thread 0's rows of dx, a
// block of rows at a time. Each sum still runs over the rows in increasing
// order, in double, from one part to the next: the same bits.
template <typename T>
void backward_in_two_parts(const T* dout, const T* x, const T* weight, const double* mean, const double* rstd,
                           int64_t rows, int64_t n, T* dx, T* dweight, T* dbias) {
    std::vector<double> sw(static_cast<size_t>(n), 0.0), sb(sw);
    const int64_t cut = (rows + 1) / 2; // where parallel_for cuts the rows
    std::atomic<int64_t> next{0};       // the next block of rows [0, cut) of dx to compute
    PartDone first_part;                // thread 0's sums over its rows
    const auto first_rows_of_dx = [&] {
        for (int64_t r0; (r0 = next.fetch_add(kRowBlock, std::memory_order_relaxed)) < cut;)
            dx_rows(dout, x, weight, mean, rstd, r0, std::min(cut, r0 + kRowBlock), n, dx);
    };
    parallel_for(0, 2, 1, [&](int64_t begin, int64_t end) {
        if (end - begin == 2) { // the loop did not split (Note [Threads on a busy machine]): all of it here
            column_sums(dout, x, mean, rstd, 0, rows, n, sw.data(), sb.data());
            dx_rows(dout, x, weight, mean, rstd, 0, rows, n, dx);
            return;
        }
        if (begin == 0) {
            PartDone::Guard guard(first_part);
            column_sums(dout, x, mean, rstd, 0, cut, n, sw.data(), sb.data());
        } else {
            dx_rows(dout, x, weight, mean, rstd, cut, rows, n, dx);
            first_part.wait();
            column_sums(dout, x, mean, rstd, cut, rows, n, sw.data(), sb.data());
        }
        first_rows_of_dx();
    });
    store_column_sums(sw.data(), sb.data(), 0, n, dweight, dbias);
    two_part_backwards.fetch_add(1, std::memory_order_relaxed);
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
    if (dx && (dweight || dbias) && get_num_threads() == 2 && rows > grain_for(n) && rows >= 2 * kRowBlock)
        return backward_in_two_parts(dout, x, weight, mean, rstd, rows, n, dx, dweight, dbias);
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

int64_t fast::layer_norm_backward_two_part_runs() { return two_part_backwards.load(std::memory_order_relaxed); }

} // namespace ember::internal
