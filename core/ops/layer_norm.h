// The loops that define layer_norm's results, row by row: included by the
// op (layer_norm.cpp) and by its fast copy (core/kernels/layer_norm.cpp),
// which visits rows and columns in another order but runs these same
// functions, so the two are one source and give the same bits. Names as
// the math (and llm.c): x, weight, bias, mean, rstd, y; dout, dx, dweight,
// dbias. Private. Tests: tests/test_layer_norm.cpp, tests/test_kernels.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/loops/row_sum.h"

namespace ember::internal {

// ---- forward: y = (x - mean) * rstd * weight + bias -----------------------------------------
//
// Sums run in double, in row_sum's order (core/loops/row_sum.h); the
// variance is biased (divides by n), as PyTorch's.

// mean = 1/n sum_j x_j over one row of n.
template <typename T>
double row_mean(const T* x, int64_t n) {
    return row_sum(n, [&](int64_t j) { return static_cast<double>(x[j]); }) / static_cast<double>(n);
}

// var = 1/n sum_j (x_j - mean)^2: a second pass, more accurate than summing
// x and x^2 together.
template <typename T>
double row_variance(const T* x, int64_t n, double mean) {
    return row_sum(n,
                   [&](int64_t j) {
                       const double d = x[j] - mean;
                       return d * d;
                   }) /
           static_cast<double>(n);
}

// rstd = 1 / sqrt(var + eps).
inline double rstd_of(double variance, double eps) { return 1.0 / std::sqrt(variance + eps); }

// y = xhat * weight + bias with xhat = (x - mean) * rstd, each step rounded
// to T as three separate ops would; weight and bias may be null.
template <typename T>
void normalize_row(const T* x, const T* weight, const T* bias, int64_t n, double mean, double rstd, T* y) {
    for (int64_t j = 0; j < n; ++j) {
        T v = static_cast<T>((x[j] - mean) * rstd); // xhat
        if (weight) v *= weight[j];
        if (bias) v += bias[j];
        y[j] = v;
    }
}

// ---- backward -----------------------------------------------------------------------------
//
// Per row, with dxhat = dout * weight:
//   dx = rstd * (dxhat - mean_j(dxhat) - xhat * mean_j(dxhat * xhat))
// (the mean and rstd depend on every x of the row: those are the two terms
// subtracted); over rows, dweight = sum dout * xhat, dbias = sum dout.

// The row's two means of the dx formula.
struct DxhatMeans {
    double dxhat;      // mean_j(dxhat)
    double dxhat_xhat; // mean_j(dxhat * xhat)
};

template <typename T>
DxhatMeans dxhat_means(const T* dout, const T* x, const T* weight, int64_t n, double mean, double rstd) {
    auto dxhat = [&](int64_t j) { return static_cast<double>(dout[j]) * weight[j]; };
    return {row_sum(n, dxhat) / static_cast<double>(n),
            row_sum(n, [&](int64_t j) { return dxhat(j) * ((x[j] - mean) * rstd); }) / static_cast<double>(n)};
}

// One row of dx; weight is all 1 when the op had none.
template <typename T>
void dx_row(const T* dout, const T* x, const T* weight, int64_t n, double mean, double rstd, DxhatMeans means, T* dx) {
    for (int64_t j = 0; j < n; ++j) {
        const double xhat = (x[j] - mean) * rstd;
        dx[j] =
            static_cast<T>(rstd * (static_cast<double>(dout[j]) * weight[j] - means.dxhat - xhat * means.dxhat_xhat));
    }
}

// Rows [r0, r1) added, in increasing row order, to the running sums of
// columns [begin, end): sw[j - begin] of dout * xhat (dweight's) and
// sb[j - begin] of dout (dbias's), in double.
template <typename T>
void add_to_column_sums(const T* dout, const T* x, const double* mean, const double* rstd, int64_t r0, int64_t r1,
                        int64_t n, int64_t begin, int64_t end, double* sw, double* sb) {
    for (int64_t r = r0; r < r1; ++r) {
        const T* g = dout + r * n;
        const T* xr = x + r * n;
        const double m = mean[r], s = rstd[r];
        for (int64_t j = begin; j < end; ++j) {
            const double gj = g[j];
            sw[j - begin] += gj * ((xr[j] - m) * s);
            sb[j - begin] += gj;
        }
    }
}

// The sums of columns [begin, end), rounded to T, into dweight and dbias
// (either may be null).
template <typename T>
void store_column_sums(const double* sw, const double* sb, int64_t begin, int64_t end, T* dweight, T* dbias) {
    for (int64_t j = begin; j < end; ++j) {
        if (dweight) dweight[j] = static_cast<T>(sw[j - begin]);
        if (dbias) dbias[j] = static_cast<T>(sb[j - begin]);
    }
}

// Columns [begin, end) of dweight and dbias (either may be null), each
// summed in double over all `rows` rows, in increasing row order.
template <typename T>
void dweight_dbias_columns(const T* dout, const T* x, const double* mean, const double* rstd, int64_t rows, int64_t n,
                           int64_t begin, int64_t end, T* dweight, T* dbias) {
    std::vector<double> sw(static_cast<size_t>(end - begin), 0.0), sb(sw);
    add_to_column_sums(dout, x, mean, rstd, 0, rows, n, begin, end, sw.data(), sb.data());
    store_column_sums(sw.data(), sb.data(), begin, end, dweight, dbias);
}

} // namespace ember::internal
