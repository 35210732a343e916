// layer_norm: a fused primitive with its backward written out.
//
// Each row (the trailing dims named by normalized_shape) is normalised to zero
// mean and unit variance, then scaled and shifted per column:
//   mean = 1/N sum x,  var = 1/N sum (x - mean)^2 (biased),
//   rstd = 1 / sqrt(var + eps),  xhat = (x - mean) * rstd,  y = xhat * w + b.
// Backward saves the math's names: x, mean, rstd. The loops here define the
// result; core/kernels/layer_norm.h is a faster copy with the same bits,
// which runs when the fast kernels are on. docs/layer_norm.md derives the
// backward; tests: tests/test_layer_norm.cpp, tests/test_kernels.cpp.
#include <cmath>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/layer_norm.h"
#include "core/loops/map.h"
#include "core/loops/row_sum.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

namespace ember {

using namespace internal;

namespace {

// forward, for `rows` rows of n: y, and the mean and rstd backward needs.
// Sums run in double, in row_sum's order (core/loops/row_sum.h).
template <typename T>
void forward_rows(const T* px, const T* pw, const T* pb, double eps, int64_t rows, int64_t n, T* py, double* pm,
                  double* pr) {
    parallel_for(0, rows, grain_for(n), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const T* xr = px + r * n;
            T* yr = py + r * n;
            // Two passes: the mean, then the squared deviations from it.
            const double m = row_sum(n, [&](int64_t j) { return static_cast<double>(xr[j]); }) / static_cast<double>(n);
            const double var = row_sum(n,
                                       [&](int64_t j) {
                                           const double d = xr[j] - m;
                                           return d * d;
                                       }) /
                               static_cast<double>(n);
            const double s = 1.0 / std::sqrt(var + eps);
            pm[r] = m;
            pr[r] = s;
            // y = xhat * w + b, each step rounded to T as three separate ops would.
            for (int64_t j = 0; j < n; ++j) {
                T v = static_cast<T>((xr[j] - m) * s); // xhat
                if (pw) v *= pw[j];
                if (pb) v += pb[j];
                yr[j] = v;
            }
        }
    });
}

// backward of y = xhat * w + b, xhat = (x - mean) * rstd, per row:
//   dxhat = dout * w
//   dx = rstd * (dxhat - mean_j(dxhat) - xhat * mean_j(dxhat * xhat))
// (the mean and rstd depend on every x of the row: those are the two terms
// subtracted), and over rows: dw = sum dout * xhat, db = sum dout, each
// column summed over the rows in order. pd, pdw and pdb may be null.
template <typename T>
void backward_rows(const T* pg, const T* px, const T* pw, const double* pm, const double* pr, int64_t rows, int64_t n,
                   T* pd, T* pdw, T* pdb) {
    if (pd)
        parallel_for(0, rows, grain_for(n), [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                const T* g = pg + r * n;
                const T* xr = px + r * n;
                const double m = pm[r], s = pr[r];
                auto dxhat = [&](int64_t j) { return static_cast<double>(g[j]) * pw[j]; };
                const double a = row_sum(n, dxhat) / static_cast<double>(n);
                const double c =
                    row_sum(n, [&](int64_t j) { return dxhat(j) * ((xr[j] - m) * s); }) / static_cast<double>(n);
                for (int64_t j = 0; j < n; ++j) {
                    const double xhat = (xr[j] - m) * s;
                    pd[r * n + j] = static_cast<T>(s * (static_cast<double>(g[j]) * pw[j] - a - xhat * c));
                }
            }
        });
    if (!pdw && !pdb) return;
    std::vector<double> sw(static_cast<size_t>(n), 0.0), sb(sw);
    for (int64_t r = 0; r < rows; ++r) {
        const T* g = pg + r * n;
        const T* xr = px + r * n;
        const double m = pm[r], s = pr[r];
        for (int64_t j = 0; j < n; ++j) {
            sw[j] += static_cast<double>(g[j]) * ((xr[j] - m) * s);
            sb[j] += static_cast<double>(g[j]);
        }
    }
    for (int64_t j = 0; j < n; ++j) {
        if (pdw) pdw[j] = static_cast<T>(sw[j]);
        if (pdb) pdb[j] = static_cast<T>(sb[j]);
    }
}

template <typename T>
T* data_or_null(const Tensor& t) {
    return t.defined() ? t.data_ptr<T>() : nullptr;
}

} // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
    const int64_t k = static_cast<int64_t>(normalized_shape.size());
    bool fits = k >= 1 && k <= x.dim();
    for (int64_t i = 0; fits && i < k; ++i) fits = x.shape()[x.dim() - k + i] == normalized_shape[i];
    if (!fits)
        fail<ShapeError>("layer_norm", "normalized_shape ", normalized_shape, " must match the last dims of the input ",
                         x.shape());
    check_floating(x, "layer_norm");
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
    const int64_t rows = n == 0 ? 0 : x.numel() / n;
    Tensor xc = contiguous_data(x);
    Tensor wc = weight.defined() ? contiguous_data(weight) : Tensor();
    Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
    Tensor y = empty_for("layer_norm", x.shape(), x.dtype());
    Tensor mean = empty_for("layer_norm", {rows}, kFloat64);
    Tensor rstd = empty_for("layer_norm", {rows}, kFloat64);
    dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>(TypeTag<T>) {
        const T* px = xc.data_ptr<T>();
        const T *pw = data_or_null<T>(wc), *pb = data_or_null<T>(bc);
        T* py = y.data_ptr<T>();
        double *pm = mean.data_ptr<double>(), *pr = rstd.data_ptr<double>();
        if (use_fast_kernels()) layer_norm_forward_rows(px, pw, pb, eps, rows, n, py, pm, pr);
        else forward_rows(px, pw, pb, eps, rows, n, py, pm, pr);
    });

    if (needs_grad(x, weight, bias)) {
        bool need_x = x.requires_grad();
        bool need_w = weight.defined() && weight.requires_grad();
        bool need_b = bias.defined() && bias.requires_grad();
        attach(y, "NativeLayerNormBackward0", {x, weight, bias},
               [xs = SavedTensor(xc), ws = SavedTensor(wc), ms = SavedTensor(mean), rs = SavedTensor(rstd), rows, n,
                need_x, need_w, need_b, shape = normalized_shape](const Tensor& dout) -> Grads {
                   const Tensor& xv = xs.get();
                   Tensor dx = need_x ? empty_for("layer_norm", xv.shape(), xv.dtype()) : Tensor();
                   Tensor dw = need_w ? empty_for("layer_norm", shape, xv.dtype()) : Tensor();
                   Tensor db = need_b ? empty_for("layer_norm", shape, xv.dtype()) : Tensor();
                   // Without a weight, dxhat = dout * 1: exact, and it keeps
                   // branches out of the loops.
                   Tensor w = ws.get().defined() ? ws.get() : ones({n}, xv.dtype());
                   Tensor g = contiguous_data(dout);
                   dispatch_floating(xv.dtype(), "layer_norm", [&]<typename T>(TypeTag<T>) {
                       const T *pg = g.data_ptr<T>(), *px = xv.data_ptr<T>(), *pw = w.data_ptr<T>();
                       const double *pm = ms.get().data_ptr<double>(), *pr = rs.get().data_ptr<double>();
                       T *pd = data_or_null<T>(dx), *pdw = data_or_null<T>(dw), *pdb = data_or_null<T>(db);
                       if (use_fast_kernels()) layer_norm_backward_rows(pg, px, pw, pm, pr, rows, n, pd, pdw, pdb);
                       else backward_rows(pg, px, pw, pm, pr, rows, n, pd, pdw, pdb);
                   });
                   return {dx, dw, db};
               });
    }
    return y;
}

} // namespace ember
