// LayerNorm, fast: see layer_norm.h. Row by row, the same operations in the
// same order as core/ops/layer_norm.cpp; only the order in which rows and
// columns are visited differs. Tests: tests/test_kernels.cpp.
#include "core/kernels/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"
#include "core/loops/row_sum.h"

namespace ember::internal {

namespace {

constexpr int64_t kRowBlock = 16;

template <typename T>
void forward(const T* px, const T* pw, const T* pb, double eps, int64_t rows, int64_t n, T* py, double* pm,
             double* pr) {
    parallel_for(0, rows, grain_for(n), [&](int64_t begin, int64_t end) {
        for (int64_t r0 = begin; r0 < end; r0 += kRowBlock) {
            const int64_t r1 = std::min(end, r0 + kRowBlock);
            for (int64_t r = r0; r < r1; ++r) {
                const T* xr = px + r * n;
                pm[r] = row_sum(n, [&](int64_t j) { return static_cast<double>(xr[j]); }) / static_cast<double>(n);
            }
            for (int64_t r = r0; r < r1; ++r) {
                const T* xr = px + r * n;
                const double m = pm[r];
                pr[r] = row_sum(n,
                                [&](int64_t j) {
                                    const double d = xr[j] - m;
                                    return d * d;
                                }) /
                        static_cast<double>(n); // the variance, for now
            }
            for (int64_t r = r0; r < r1; ++r) pr[r] = 1.0 / std::sqrt(pr[r] + eps);
            for (int64_t r = r0; r < r1; ++r) {
                const T* xr = px + r * n;
                T* yr = py + r * n;
                const double m = pm[r], s = pr[r];
                for (int64_t j = 0; j < n; ++j) {
                    T v = static_cast<T>((xr[j] - m) * s);
                    if (pw) v *= pw[j];
                    if (pb) v += pb[j];
                    yr[j] = v;
                }
            }
        }
    });
}

// Columns [begin, end) of dw and db (either may be null), each summed over
// all rows in order.
template <typename T>
EMBER_VECTOR_CLONES void dw_db_columns(const T* pg, const T* px, const double* pm, const double* pr, T* pdw, T* pdb,
                                       int64_t rows, int64_t n, int64_t begin, int64_t end) {
    std::vector<double> sw(static_cast<size_t>(end - begin), 0.0), sb(sw);
    for (int64_t r = 0; r < rows; ++r) {
        const T* g = pg + r * n;
        const T* xr = px + r * n;
        const double m = pm[r], s = pr[r];
        for (int64_t j = begin; j < end; ++j) {
            const double gj = g[j];
            sw[j - begin] += gj * ((xr[j] - m) * s);
            sb[j - begin] += gj;
        }
    }
    for (int64_t j = begin; j < end; ++j) {
        if (pdw) pdw[j] = static_cast<T>(sw[j - begin]);
        if (pdb) pdb[j] = static_cast<T>(sb[j - begin]);
    }
}

template <typename T>
void backward(const T* pg, const T* px, const T* pw, const double* pm, const double* pr, int64_t rows, int64_t n, T* pd,
              T* pdw, T* pdb) {
    if (pd) {
        parallel_for(0, rows, grain_for(n), [&](int64_t begin, int64_t end) {
            double dxhat_mean[kRowBlock], dxhat_xhat_mean[kRowBlock];
            for (int64_t r0 = begin; r0 < end; r0 += kRowBlock) {
                const int64_t r1 = std::min(end, r0 + kRowBlock);
                for (int64_t r = r0; r < r1; ++r) {
                    const T* g = pg + r * n;
                    const T* xr = px + r * n;
                    const double m = pm[r], s = pr[r];
                    auto dxhat = [&](int64_t j) { return static_cast<double>(g[j]) * pw[j]; };
                    dxhat_mean[r - r0] = row_sum(n, dxhat) / static_cast<double>(n);
                    dxhat_xhat_mean[r - r0] =
                        row_sum(n, [&](int64_t j) { return dxhat(j) * ((xr[j] - m) * s); }) / static_cast<double>(n);
                }
                for (int64_t r = r0; r < r1; ++r) {
                    const T* g = pg + r * n;
                    const T* xr = px + r * n;
                    const double m = pm[r], s = pr[r], a = dxhat_mean[r - r0], c = dxhat_xhat_mean[r - r0];
                    for (int64_t j = 0; j < n; ++j) {
                        const double xhat = (xr[j] - m) * s;
                        pd[r * n + j] = static_cast<T>(s * (static_cast<double>(g[j]) * pw[j] - a - xhat * c));
                    }
                }
            }
        });
    }
    // Each thread owns a range of columns and walks the rows in order, so
    // every sum runs over r in increasing order whatever the thread count,
    // and the inner loop reads contiguous memory.
    if (pdw || pdb)
        parallel_for(0, n, grain_for(rows),
                     [&](int64_t begin, int64_t end) { dw_db_columns(pg, px, pm, pr, pdw, pdb, rows, n, begin, end); });
}

} // namespace

void layer_norm_forward_rows(const float* x, const float* w, const float* b, double eps, int64_t rows, int64_t n,
                             float* y, double* mean, double* rstd) {
    forward(x, w, b, eps, rows, n, y, mean, rstd);
}
void layer_norm_forward_rows(const double* x, const double* w, const double* b, double eps, int64_t rows, int64_t n,
                             double* y, double* mean, double* rstd) {
    forward(x, w, b, eps, rows, n, y, mean, rstd);
}
void layer_norm_backward_rows(const float* dout, const float* x, const float* w, const double* mean, const double* rstd,
                              int64_t rows, int64_t n, float* dx, float* dw, float* db) {
    backward(dout, x, w, mean, rstd, rows, n, dx, dw, db);
}
void layer_norm_backward_rows(const double* dout, const double* x, const double* w, const double* mean,
                              const double* rstd, int64_t rows, int64_t n, double* dx, double* dw, double* db) {
    backward(dout, x, w, mean, rstd, rows, n, dx, dw, db);
}

} // namespace ember::internal
