// softmax and log_softmax along any dim, each a fused primitive with its own
// backward; and scaled_masked_softmax, attention's scale, causal mask and
// softmax in one pass each way, with the bits of the three ops one by one.
// The loops here define every result; rows along the last dim also have
// faster copies with the same bits (core/kernels/softmax.h). docs/softmax.md
// derives the backward passes. Tests: tests/test_softmax.cpp,
// tests/test_kernels.cpp.
#include <cmath>
#include <limits>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/softmax.h"
#include "core/loops/exponential.h"
#include "core/loops/map.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

// All subtract the row's max before exponentiating, so large logits cannot
// overflow: softmax(x) = e^(x - m) / sum e^(x - m) is the same function for
// any m. A row that is all -inf (fully masked) gives NaN, as in PyTorch.

namespace ember {

using namespace internal;

namespace {

// Calls fn(base, stride, n) for each row along `dim` of a contiguous tensor of
// `shape`: the row's elements are base, base + stride, ..., n of them.
// Threads take whole rows.
template <typename F>
void for_each_row(const Shape& shape, int64_t dim, const F& fn) {
    DimSplit s = split_at(shape, dim);
    parallel_for(0, s.outer * s.inner, grain_for(s.size), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            int64_t o = r / s.inner, j = r % s.inner;
            fn(o * s.size * s.inner + j, s.inner, s.size);
        }
    });
}

// One row of softmax (log = false) or log_softmax (log = true): the row's
// elements are x[0], x[stride], ..., n of them. out may be x itself.
template <typename T>
void softmax_row(const T* x, T* out, int64_t stride, int64_t n, bool log) {
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i * stride]);
    // sum = sum_i e^(x_i - m), accumulated in double. A -inf entry (a masked
    // position) contributes e^-inf = 0 exactly.
    const double sum = sum_exp(x, stride, n, m, log ? nullptr : out);
    if (log) {
        // log_softmax = x - m - log(sum)
        T log_sum = static_cast<T>(std::log(sum));
        for (int64_t i = 0; i < n; ++i) out[i * stride] = x[i * stride] - m - log_sum;
    } else {
        // softmax = e^(x - m) * (1 / sum), as PyTorch's kernel does.
        T scale = T(1) / static_cast<T>(sum);
        for (int64_t i = 0; i < n; ++i) out[i * stride] *= scale;
    }
}

// forward: the softmax (log = false) or log_softmax (log = true) of x along dim.
Tensor softmax_forward(const Tensor& x_in, int64_t dim, bool log) {
    Tensor x = contiguous_data(x_in);
    Tensor out = empty_for(log ? "log_softmax" : "softmax", x.shape(), x.dtype());
    dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>(TypeTag<T>) {
        const T* px = x.data_ptr<T>();
        T* po = out.data_ptr<T>();
        if (!log && dim == x.dim() - 1 && x.numel() > 0 && use_fast_kernels()) {
            softmax_last_dim(px, po, x.numel() / x.size(-1), x.size(-1));
            return;
        }
        for_each_row(x.shape(), dim, [&](int64_t base, int64_t stride, int64_t n) {
            softmax_row(px + base, po + base, stride, n, log);
        });
    });
    return out;
}

// The shared shape of both backward passes: dx, one row at a time, from the
// saved output y and dout: row(y, g, dx, stride, n) fills one row of dx.
template <typename Row>
Tensor row_backward(const Tensor& y, const Tensor& dout, int64_t dim, const char* op, const Row& row) {
    Tensor g = contiguous_data(dout);
    Tensor dx = empty_for(op, y.shape(), y.dtype());
    dispatch_floating(y.dtype(), op, [&]<typename T>(TypeTag<T>) {
        const T* py = y.data_ptr<T>();
        const T* pg = g.data_ptr<T>();
        T* pd = dx.data_ptr<T>();
        for_each_row(y.shape(), dim,
                     [&](int64_t base, int64_t stride, int64_t n) { row(py + base, pg + base, pd + base, stride, n); });
    });
    return dx;
}

} // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
    int64_t d = wrap_dim(dim, x.dim(), "softmax");
    check_floating(x, "softmax");
    Tensor y = softmax_forward(x, d, false);
    // forward: y_i = e^(x_i) / sum_j e^(x_j), whose Jacobian is
    // dy_i/dx_k = y_i (delta_ik - y_k). So dx_k = sum_i dy_i y_i (delta_ik - y_k)
    // = y_k (dy_k - sum_i dy_i y_i): one dot product per row, then one pass.
    if (needs_grad(x))
        attach(y, "SoftmaxBackward0", {x}, [ys = SavedTensor(y), d](const Tensor& dout) -> Grads {
            return {row_backward(ys.get(), dout, d, "softmax",
                                 []<typename T>(const T* y, const T* g, T* dx, int64_t s, int64_t n) {
                                     T dot = 0;
                                     for (int64_t i = 0; i < n; ++i) dot += g[i * s] * y[i * s];
                                     for (int64_t i = 0; i < n; ++i) dx[i * s] = y[i * s] * (g[i * s] - dot);
                                 })};
        });
    return y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
    int64_t d = wrap_dim(dim, x.dim(), "log_softmax");
    check_floating(x, "log_softmax");
    Tensor y = softmax_forward(x, d, true);
    // forward: y_i = x_i - log sum_j e^(x_j), so dy_i/dx_k = delta_ik - softmax_k
    // and dx_k = dy_k - softmax_k * sum_i dy_i, with softmax_k = e^(y_k).
    if (needs_grad(x))
        attach(y, "LogSoftmaxBackward0", {x}, [ys = SavedTensor(y), d](const Tensor& dout) -> Grads {
            return {row_backward(ys.get(), dout, d, "log_softmax",
                                 []<typename T>(const T* y, const T* g, T* dx, int64_t s, int64_t n) {
                                     T total = 0;
                                     for (int64_t i = 0; i < n; ++i) total += g[i * s];
                                     for (int64_t i = 0; i < n; ++i)
                                         dx[i * s] = g[i * s] - exponential(y[i * s]) * total;
                                 })};
        });
    return y;
}

// ---- scaled_masked_softmax: attention's three lines in one pass ----------------------------

namespace {

// Row r of a mask expanded to x's shape (..., n): r decomposed over the
// leading dims, times the mask's strides (0 along the broadcast dims).
const bool* mask_row(const Tensor& m, int64_t r) {
    int64_t offset = 0;
    for (int64_t d = m.dim() - 2; d >= 0; --d) {
        offset += r % m.shape()[d] * m.strides()[d];
        r /= m.shape()[d];
    }
    return m.data_ptr<bool>() + offset;
}

} // namespace

Tensor scaled_masked_softmax(const Tensor& x, const Tensor& mask, double scale, ScaleOp op) {
    const char* name = "scaled_masked_softmax";
    check_floating(x, name);
    if (x.dim() < 1) fail<ShapeError>(name, "needs at least one dim to take the softmax over, got ", x.shape());
    // Masking before or after scaling is the same only for a positive scale
    // (-inf * s stays -inf), so that is all this op takes; positive and
    // finite in x's dtype, where it is applied (1e39 is inf in float32).
    const double applied = x.dtype() == kFloat32 ? static_cast<double>(static_cast<float>(scale)) : scale;
    if (!(applied > 0) || !std::isfinite(applied))
        fail<ValueError>(name, "scale must be positive and finite in ", dtype_name(x.dtype()), ", got ", scale,
                         " (input ", x.shape(), ")");
    Tensor m; // the mask expanded to x's shape, a view
    if (mask.defined()) {
        if (mask.dtype() != kBool)
            fail<DTypeError>(name, "the mask must be a bool tensor (true = masked out), got ", dtype_name(mask.dtype()),
                             " of shape ", mask.shape(), " for input ", x.shape());
        if (broadcast_shapes(x.shape(), mask.shape(), name) != x.shape())
            fail<ShapeError>(name, "mask of shape ", mask.shape(), " does not broadcast to the input's shape ",
                             x.shape());
        m = mask.expand(x.shape());
    }
    const int64_t n = x.size(-1);
    const bool divide = op == ScaleOp::divide;
    Tensor xc = contiguous_data(x);
    Tensor y = empty_for(name, x.shape(), x.dtype());
    // forward, per row of n: y = x * s (or x / s); y = -inf where masked;
    // then softmax in place. (With n = 0 there is nothing to compute, nor a
    // row to index.)
    if (n > 0)
        dispatch_floating(x.dtype(), name, [&]<typename T>(TypeTag<T>) {
            const T* px = xc.data_ptr<T>();
            T* py = y.data_ptr<T>();
            const T s = static_cast<T>(scale); // cast first, as x * 0.125 on float32 does
            const int64_t rows = x.numel() / n;
            if (use_fast_kernels()) {
                scaled_masked_softmax_rows(px, py, rows, n, m, s, divide);
                return;
            }
            parallel_for(0, rows, grain_for(n), [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                    const T* xr = px + r * n;
                    T* yr = py + r * n;
                    for (int64_t i = 0; i < n; ++i) yr[i] = divide ? xr[i] / s : xr[i] * s;
                    if (m.defined()) {
                        const bool* mr = mask_row(m, r);
                        for (int64_t i = 0; i < n; ++i)
                            if (mr[i * m.stride(-1)]) yr[i] = -std::numeric_limits<T>::infinity();
                    }
                    softmax_row(yr, yr, 1, n, false);
                }
            });
        });
    // backward, per row: softmax's dS = y (dy - sum dy y); the mask's
    // backward zeroes dS where masked; the scale's multiplies (or divides)
    // by s. The same float operations in the same order as the three ops
    // one by one, so the bits agree too.
    if (needs_grad(x))
        attach(y, "ScaledMaskedSoftmaxBackward", {x},
               [ys = SavedTensor(y), ms = SavedTensor(m), scale, divide, n](const Tensor& dout) -> Grads {
                   const Tensor& yv = ys.get();
                   const Tensor& mv = ms.get(); // throws if the mask changed in place since
                   Tensor g = contiguous_data(dout);
                   Tensor dx = empty_for("scaled_masked_softmax", yv.shape(), yv.dtype());
                   if (n > 0)
                       dispatch_floating(yv.dtype(), "scaled_masked_softmax", [&]<typename T>(TypeTag<T>) {
                           const T* py = yv.data_ptr<T>();
                           const T* pg = g.data_ptr<T>();
                           T* pd = dx.data_ptr<T>();
                           const T s = static_cast<T>(scale);
                           const int64_t rows = yv.numel() / n;
                           if (use_fast_kernels()) {
                               scaled_masked_softmax_backward_rows(py, pg, pd, rows, n, mv, s, divide);
                               return;
                           }
                           parallel_for(0, rows, grain_for(n), [&](int64_t b, int64_t e) {
                               for (int64_t r = b; r < e; ++r) {
                                   const T *yr = py + r * n, *gr = pg + r * n;
                                   T* dr = pd + r * n;
                                   T dot = 0;
                                   for (int64_t i = 0; i < n; ++i) dot += gr[i] * yr[i];
                                   for (int64_t i = 0; i < n; ++i)
                                       dr[i] = divide ? yr[i] * (gr[i] - dot) / s : yr[i] * (gr[i] - dot) * s;
                                   if (mv.defined()) {
                                       const bool* mr = mask_row(mv, r);
                                       for (int64_t i = 0; i < n; ++i)
                                           if (mr[i * mv.stride(-1)]) dr[i] = T(0);
                                   }
                               }
                           });
                       });
                   return {dx};
               });
    return y;
}

} // namespace ember
