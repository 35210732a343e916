// layer_norm: a fused primitive with its backward written out.
//
// Each row (the trailing dims named by normalized_shape) is normalised to zero
// mean and unit variance, then scaled and shifted per column:
//   mean = 1/N sum x,  var = 1/N sum (x - mean)^2 (biased),
//   rstd = 1 / sqrt(var + eps),  xhat = (x - mean) * rstd,  y = xhat * w + b.
// Backward saves the math's names: x, mean, rstd. Rows are independent, so
// threads split rows for dx; dw and db sum over rows, so threads split
// columns for them (a split of one loop into two, racing on nothing).
// docs/layer_norm.md derives the backward; tests/test_layer_norm.cpp.
#include <cmath>
#include <vector>

#include "autograd.h"
#include "loops.h"
#include "ops.h"
#include "shape.h"
#include "vectorize.h"

namespace ember {

using namespace internal;

namespace {

// Rows of length n, rows in total, and the grain that keeps small inputs on one thread.
struct Rows {
    int64_t count, n;
    int64_t grain() const { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1)); }
};

// sum_{j < n} f(j) in double, as eight interleaved partial sums (j mod 8)
// added at the end. One running sum makes every add wait for the one before
// it; eight independent ones keep the adder busy. The order is fixed, so the
// result does not depend on the thread count.
template <typename F>
double row_sum(int64_t n, const F& f) {
    double part[8] = {};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; ++k) part[k] += f(j + k);
    for (; j < n; ++j) part[j % 8] += f(j);
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// Rows are processed in blocks of kRowBlock: first the statistics of every
// row of the block, then its outputs. A row's statistics are a chain of
// dependent steps (a sum, a division, a second sum, a square root, a
// division); with rows of 32 that chain, not the arithmetic, set the pace
// when each row ran start to finish. Kept apart, the chains of neighbouring
// rows overlap in the CPU. Every row's arithmetic is unchanged.
constexpr int64_t kRowBlock = 16;

template <typename T>
void forward_kernel(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Rows& rows, const Tensor& y,
                    const Tensor& mean, const Tensor& rstd) {
    const T* px = x.data_ptr<T>();
    const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
    const T* pb = b.defined() ? b.data_ptr<T>() : nullptr;
    T* py = y.data_ptr<T>();
    double* pm = mean.data_ptr<double>();
    double* pr = rstd.data_ptr<double>();
    const int64_t n = rows.n;
    parallel_for(0, rows.count, rows.grain(), [&](int64_t begin, int64_t end) {
        for (int64_t r0 = begin; r0 < end; r0 += kRowBlock) {
            const int64_t r1 = std::min(end, r0 + kRowBlock);
            // Two passes in double: the mean, then the squared deviations.
            for (int64_t r = r0; r < r1; ++r) {
                const T* xr = px + r * n;
                pm[r] = row_sum(n, [&](int64_t j) { return static_cast<double>(xr[j]); }) / static_cast<double>(n);
            }
            for (int64_t r = r0; r < r1; ++r) {
                const T* xr = px + r * n;
                const double m = pm[r];
                pr[r] = row_sum(n, [&](int64_t j) {
                            const double d = xr[j] - m;
                            return d * d;
                        }) /
                        static_cast<double>(n); // the variance, for now
            }
            for (int64_t r = r0; r < r1; ++r) pr[r] = 1.0 / std::sqrt(pr[r] + eps);
            // y = xhat * w + b, each step rounded to T as three separate ops would.
            for (int64_t r = r0; r < r1; ++r) {
                const T* xr = px + r * n;
                T* yr = py + r * n;
                const double m = pm[r], s = pr[r];
                for (int64_t j = 0; j < n; ++j) {
                    T v = static_cast<T>((xr[j] - m) * s); // xhat
                    if (pw) v *= pw[j];
                    if (pb) v += pb[j];
                    yr[j] = v;
                }
            }
        }
    });
}

// Columns [begin, end) of LayerNorm's dw and db (either may be null), each
// summed over all rows in order. Marked for an AVX2 copy (core/vectorize.h):
// this loop runs faster that way; the row kernels here ran slower, so they
// are not marked.
template <typename T>
EMBER_VECTOR_CLONES void backward_dw_db_columns(const T* pg, const T* px, const double* pm, const double* pr, T* pdw,
                                                T* pdb, int64_t count, int64_t n, int64_t begin, int64_t end) {
    std::vector<double> sw(static_cast<size_t>(end - begin), 0.0), sb(sw);
    for (int64_t r = 0; r < count; ++r) {
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

// backward of y = xhat * w + b, xhat = (x - mean) * rstd, per row:
//   dxhat = dout * w
//   dx = rstd * (dxhat - mean_j(dxhat) - xhat * mean_j(dxhat * xhat))
// (the mean and rstd depend on every x of the row: those are the two terms
// subtracted), and over rows: dw = sum dout * xhat, db = sum dout.
template <typename T>
void backward_kernel(const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                     const Rows& rows, const Tensor& dx, const Tensor& dw, const Tensor& db) {
    const T* pg = dout.data_ptr<T>();
    const T* px = x.data_ptr<T>();
    // Without a weight, dxhat = dout * 1: exact, and it keeps branches out of the loops.
    std::vector<T> unit_weight;
    if (!w.defined()) unit_weight.assign(static_cast<size_t>(rows.n), T(1));
    const T* pw = w.defined() ? w.data_ptr<T>() : unit_weight.data();
    const double* pm = mean.data_ptr<double>();
    const double* pr = rstd.data_ptr<double>();
    const int64_t n = rows.n;
    if (dx.defined()) {
        T* pd = dx.data_ptr<T>();
        parallel_for(0, rows.count, rows.grain(), [&](int64_t begin, int64_t end) {
            // The two means of each row of a block first, as in the forward.
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
    if (dw.defined() || db.defined()) {
        T* pdw = dw.defined() ? dw.data_ptr<T>() : nullptr;
        T* pdb = db.defined() ? db.data_ptr<T>() : nullptr;
        // Each thread owns a range of columns and walks the rows in order, so
        // every sum runs over r in increasing order whatever the thread count,
        // and the inner loop reads contiguous memory.
        parallel_for(0, n, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(rows.count, 1)),
                     [&](int64_t begin, int64_t end) {
                         backward_dw_db_columns(pg, px, pm, pr, pdw, pdb, rows.count, n, begin, end);
                     });
    }
}

} // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
    const int64_t k = static_cast<int64_t>(normalized_shape.size());
    bool fits = k >= 1 && k <= x.dim();
    for (int64_t i = 0; fits && i < k; ++i) fits = x.shape()[x.dim() - k + i] == normalized_shape[i];
    if (!fits)
        fail<ShapeError>("layer_norm", "normalized_shape ", normalized_shape, " must match the last dims of the input ",
                         x.shape());
    if (!x.is_floating_point())
        fail<DTypeError>("layer_norm", "needs a floating point input, got ", dtype_name(x.dtype()), " ", x.shape());
    for (const Tensor* p : {&weight, &bias}) {
        if (!p->defined()) continue;
        if (p->shape() != normalized_shape)
            fail<ShapeError>("layer_norm", p == &weight ? "weight" : "bias", " has shape ", p->shape(),
                             ", expected normalized_shape ", normalized_shape, " (input ", x.shape(), ")");
        if (p->dtype() != x.dtype())
            fail<DTypeError>("layer_norm", p == &weight ? "weight" : "bias", " is ", dtype_name(p->dtype()),
                             " but the input is ", dtype_name(x.dtype()));
    }
    if (!(eps >= 0)) fail<ValueError>("layer_norm", "eps must be non-negative, got ", eps);

    const int64_t n = shape_numel(normalized_shape);
    const Rows rows{n == 0 ? 0 : x.numel() / n, n};
    Tensor xc = contiguous_data(x);
    Tensor wc = weight.defined() ? contiguous_data(weight) : Tensor();
    Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
    Tensor y = empty(x.shape(), x.dtype());
    Tensor mean = empty({rows.count}, kFloat64);
    Tensor rstd = empty({rows.count}, kFloat64);
    dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>(TypeTag<T>) {
        forward_kernel<T>(xc, wc, bc, eps, rows, y, mean, rstd);
    });

    if (needs_grad(x, weight, bias)) {
        bool need_x = x.requires_grad();
        bool need_w = weight.defined() && weight.requires_grad();
        bool need_b = bias.defined() && bias.requires_grad();
        attach(y, "NativeLayerNormBackward0", {x, weight, bias},
               [xs = SavedTensor(xc), ws = SavedTensor(wc), ms = SavedTensor(mean), rs = SavedTensor(rstd), rows,
                need_x, need_w, need_b, shape = normalized_shape](const Tensor& dout) -> Grads {
                   const Tensor& xv = xs.get();
                   Tensor dx = need_x ? empty(xv.shape(), xv.dtype()) : Tensor();
                   Tensor dw = need_w ? empty(shape, xv.dtype()) : Tensor();
                   Tensor db = need_b ? empty(shape, xv.dtype()) : Tensor();
                   Tensor g = contiguous_data(dout);
                   dispatch_floating(xv.dtype(), "layer_norm", [&]<typename T>(TypeTag<T>) {
                       backward_kernel<T>(g, xv, ws.get(), ms.get(), rs.get(), rows, dx, dw, db);
                   });
                   return {dx, dw, db};
               });
    }
    return y;
}

} // namespace ember
