// softmax and log_softmax along any dim, each a fused primitive with its own
// backward.
//
// Both subtract the row's max before exponentiating, so large logits cannot
// overflow: softmax(x) = e^(x - m) / sum e^(x - m) is the same function for
// any m. A row that is all -inf (fully masked) gives NaN, as in PyTorch.
// docs/softmax.md derives the backward passes. Tests: tests/test_softmax.cpp.
#include <cmath>
#include <limits>

#include "autograd.h"
#include "loops.h"
#include "ops.h"
#include "shape.h"

namespace ember {

using namespace internal;

namespace {

// Calls fn(base, stride, n) for each row along `dim` of a contiguous tensor of
// `shape`: the row's elements are base, base + stride, ..., n of them.
template <typename F>
void for_each_row(const Shape& shape, int64_t dim, const F& fn) {
    DimSplit s = split_at(shape, dim);
    int64_t rows = s.outer * s.inner;
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(s.size, 1));
    parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            int64_t o = r / s.inner, j = r % s.inner;
            fn(o * s.size * s.inner + j, s.inner, s.size);
        }
    });
}

// forward: the softmax (log = false) or log_softmax (log = true) of x along dim.
Tensor softmax_forward(const Tensor& x_in, int64_t dim, bool log) {
    Tensor x = contiguous_data(x_in);
    Tensor out = empty(x.shape(), x.dtype());
    dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>(TypeTag<T>) {
        const T* px = x.data_ptr<T>();
        T* po = out.data_ptr<T>();
        for_each_row(x.shape(), dim, [&](int64_t base, int64_t stride, int64_t n) {
            const T* xr = px + base;
            T* orow = po + base;
            T m = -std::numeric_limits<T>::infinity();
            for (int64_t i = 0; i < n; ++i) m = std::max(m, xr[i * stride]);
            // sum = sum_i e^(x_i - m), accumulated in double.
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) {
                T e = std::exp(xr[i * stride] - m);
                if (!log) orow[i * stride] = e;
                sum += e;
            }
            if (log) {
                // log_softmax = x - m - log(sum)
                T log_sum = static_cast<T>(std::log(sum));
                for (int64_t i = 0; i < n; ++i) orow[i * stride] = xr[i * stride] - m - log_sum;
            } else {
                // softmax = e^(x - m) * (1 / sum), as PyTorch's kernel does.
                T scale = T(1) / static_cast<T>(sum);
                for (int64_t i = 0; i < n; ++i) orow[i * stride] *= scale;
            }
        });
    });
    return out;
}

// The shared shape of both backward passes: dx, one row at a time, from the
// saved output y and dout: row(y, g, dx, stride, n) fills one row of dx.
template <typename Row>
Tensor row_backward(const Tensor& y, const Tensor& dout, int64_t dim, const char* op, const Row& row) {
    Tensor g = contiguous_data(dout);
    Tensor dx = empty(y.shape(), y.dtype());
    dispatch_floating(y.dtype(), op, [&]<typename T>(TypeTag<T>) {
        const T* py = y.data_ptr<T>();
        const T* pg = g.data_ptr<T>();
        T* pd = dx.data_ptr<T>();
        for_each_row(y.shape(), dim, [&](int64_t base, int64_t stride, int64_t n) {
            row(py + base, pg + base, pd + base, stride, n);
        });
    });
    return dx;
}

} // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
    int64_t d = wrap_dim(dim, x.dim(), "softmax");
    if (!x.is_floating_point())
        fail<DTypeError>("softmax", "needs a floating point tensor, got ", dtype_name(x.dtype()), " of shape ", x.shape());
    Tensor y = softmax_forward(x, d, false);
    // forward: y_i = e^(x_i) / sum_j e^(x_j), whose Jacobian is
    // dy_i/dx_k = y_i (delta_ik - y_k). So dx_k = sum_i dy_i y_i (delta_ik - y_k)
    // = y_k (dy_k - sum_i dy_i y_i): one dot product per row, then one pass.
    if (needs_grad(x))
        attach(y, "SoftmaxBackward0", {x}, [ys = SavedTensor(y), d](const Tensor& dout) -> Grads {
            return {row_backward(ys.get(), dout, d, "softmax", []<typename T>(const T* y, const T* g, T* dx, int64_t s, int64_t n) {
                T dot = 0;
                for (int64_t i = 0; i < n; ++i) dot += g[i * s] * y[i * s];
                for (int64_t i = 0; i < n; ++i) dx[i * s] = y[i * s] * (g[i * s] - dot);
            })};
        });
    return y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
    int64_t d = wrap_dim(dim, x.dim(), "log_softmax");
    if (!x.is_floating_point())
        fail<DTypeError>("log_softmax", "needs a floating point tensor, got ", dtype_name(x.dtype()), " of shape ",
                         x.shape());
    Tensor y = softmax_forward(x, d, true);
    // forward: y_i = x_i - log sum_j e^(x_j), so dy_i/dx_k = delta_ik - softmax_k
    // and dx_k = dy_k - softmax_k * sum_i dy_i, with softmax_k = e^(y_k).
    if (needs_grad(x))
        attach(y, "LogSoftmaxBackward0", {x}, [ys = SavedTensor(y), d](const Tensor& dout) -> Grads {
            return {row_backward(ys.get(), dout, d, "log_softmax", []<typename T>(const T* y, const T* g, T* dx, int64_t s, int64_t n) {
                T total = 0;
                for (int64_t i = 0; i < n; ++i) total += g[i * s];
                for (int64_t i = 0; i < n; ++i) dx[i * s] = g[i * s] - std::exp(y[i * s]) * total;
            })};
        });
    return y;
}

} // namespace ember
