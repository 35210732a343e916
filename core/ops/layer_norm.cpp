// layer_norm: a fused primitive with its backward written out.
//
// Each row (the trailing dims named by normalized_shape) is normalised to zero
// mean and unit variance, then scaled and shifted per column:
//   mean = 1/N sum x,  var = 1/N sum (x - mean)^2 (biased),
//   rstd = 1 / sqrt(var + eps),  xhat = (x - mean) * rstd,  y = xhat * w + b.
// Backward saves the math's names: x, mean, rstd. The row loops that define
// the result are in layer_norm.h; with the fast kernels on,
// core/kernels/layer_norm.cpp runs the same functions in another order of
// rows and columns, with the same bits. docs/layer_norm.md derives the
// backward; tests: tests/test_layer_norm.cpp, tests/test_kernels.cpp.
#include "core/ops/layer_norm.h"

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/loops/parallel.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::check_floating;
using internal::contiguous_data;
using internal::dweight_dbias_columns;
using internal::dx_row;
using internal::dxhat_means;
using internal::DxhatMeans;
using internal::empty_for;
using internal::kFastKernelsBuilt;
using internal::normalize_row;
using internal::row_mean;
using internal::row_variance;
using internal::rstd_of;
using internal::use_fast_kernels;
namespace fast = internal::fast;

namespace {

// forward, for `rows` rows of n: y, and the mean and rstd backward needs;
// the fast copy when the fast kernels are on (core/kernels/dispatch.h).
template <typename T>
void forward(const T* x, const T* weight, const T* bias, double eps, int64_t rows, int64_t n, T* y, double* mean,
             double* rstd) {
    if constexpr (kFastKernelsBuilt) {
        if (use_fast_kernels()) return fast::layer_norm_forward(x, weight, bias, eps, rows, n, y, mean, rstd);
    }
    parallel_for(0, rows, grain_for(n), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const T* xr = x + r * n;
            mean[r] = row_mean(xr, n);
            rstd[r] = rstd_of(row_variance(xr, n, mean[r]), eps);
            normalize_row(xr, weight, bias, n, mean[r], rstd[r], y + r * n);
        }
    });
}

// backward: dx, dweight and dbias (each may be null) from dout and the saved
// x, mean and rstd; weight is all 1 when the op had none. dweight and dbias
// sum each column over the rows in order, on one thread.
template <typename T>
void backward(const T* dout, const T* x, const T* weight, const double* mean, const double* rstd, int64_t rows,
              int64_t n, T* dx, T* dweight, T* dbias) {
    if constexpr (kFastKernelsBuilt) {
        if (use_fast_kernels())
            return fast::layer_norm_backward(dout, x, weight, mean, rstd, rows, n, dx, dweight, dbias);
    }
    if (dx)
        parallel_for(0, rows, grain_for(n), [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                const T *g = dout + r * n, *xr = x + r * n;
                const DxhatMeans means = dxhat_means(g, xr, weight, n, mean[r], rstd[r]);
                dx_row(g, xr, weight, n, mean[r], rstd[r], means, dx + r * n);
            }
        });
    if (dweight || dbias) dweight_dbias_columns(dout, x, mean, rstd, rows, n, 0, n, dweight, dbias);
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
        forward(xc.data_ptr<T>(), data_or_null<T>(wc), data_or_null<T>(bc), eps, rows, n, y.data_ptr<T>(),
                mean.data_ptr<double>(), rstd.data_ptr<double>());
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
                       backward(g.data_ptr<T>(), xv.data_ptr<T>(), w.data_ptr<T>(), ms.get().data_ptr<double>(),
                                rs.get().data_ptr<double>(), rows, n, data_or_null<T>(dx), data_or_null<T>(dw),
                                data_or_null<T>(db));
                   });
                   return {dx, dw, db};
               });
    }
    return y;
}

} // namespace ember
