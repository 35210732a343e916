// softmax and log_softmax along any dim, each a fused primitive with its own
// backward; and scaled_masked_softmax, attention's scale, causal mask and
// softmax in one pass each way, with the bits of the three ops one by one.
// The row loops that define every result are in softmax.h; with the fast
// kernels on, rows along the last dim run core/kernels/softmax.cpp's copies,
// with the same bits. docs/softmax.md derives the backward passes. Tests:
// tests/test_softmax.cpp, tests/test_kernels.cpp.
#include "core/ops/softmax.h"

#include <cmath>
#include <limits>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/loops/iter.h"
#include "core/loops/parallel.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::check_floating;
using internal::contiguous_data;
using internal::DimSplit;
using internal::empty_for;
using internal::kFastKernelsBuilt;
using internal::log_softmax_backward_row;
using internal::offset_of;
using internal::scaled_masked_softmax_backward_row;
using internal::scaled_masked_softmax_row;
using internal::softmax_backward_row;
using internal::softmax_row;
using internal::split_at;
using internal::use_fast_kernels;
namespace fast = internal::fast;

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

// forward: the softmax (log = false) or log_softmax (log = true) of x along
// dim; softmax's rows along the last dim by the fast copy when the fast
// kernels are on (core/kernels/dispatch.h).
Tensor softmax_forward(const Tensor& x_in, int64_t dim, bool log) {
    Tensor x = contiguous_data(x_in);
    Tensor out = empty_for(log ? "log_softmax" : "softmax", x.shape(), x.dtype());
    dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>(TypeTag<T>) {
        const T* px = x.data_ptr<T>();
        T* po = out.data_ptr<T>();
        if constexpr (kFastKernelsBuilt) {
            if (!log && dim == x.dim() - 1 && x.numel() > 0 && use_fast_kernels())
                return fast::softmax_last_dim(px, po, x.numel() / x.size(-1), x.size(-1));
        }
        for_each_row(x.shape(), dim, [&](int64_t base, int64_t stride, int64_t n) {
            softmax_row(px + base, po + base, stride, n, log);
        });
    });
    return out;
}

// The shared shape of both backward passes: dx, one row at a time, from the
// saved output y and dout: row(y, dy, dx, stride, n) fills one row of dx.
template <typename Row>
Tensor row_backward(const Tensor& y, const Tensor& dout, int64_t dim, const char* op, const Row& row) {
    Tensor dy = contiguous_data(dout);
    Tensor dx = empty_for(op, y.shape(), y.dtype());
    dispatch_floating(y.dtype(), op, [&]<typename T>(TypeTag<T>) {
        const T* py = y.data_ptr<T>();
        const T* pdy = dy.data_ptr<T>();
        T* pdx = dx.data_ptr<T>();
        for_each_row(y.shape(), dim, [&](int64_t base, int64_t stride, int64_t n) {
            row(py + base, pdy + base, pdx + base, stride, n);
        });
    });
    return dx;
}

} // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
    int64_t d = wrap_dim(dim, x.dim(), "softmax");
    check_floating(x, "softmax");
    Tensor y = softmax_forward(x, d, false);
    // backward: dx = y (dy - sum dy y), row by row (softmax.h).
    if (needs_grad(x))
        attach(y, "SoftmaxBackward0", {x}, [ys = SavedTensor(y), d](const Tensor& dout) -> Grads {
            return {row_backward(ys.get(), dout, d, "softmax",
                                 []<typename T>(const T* y, const T* dy, T* dx, int64_t stride, int64_t n) {
                                     softmax_backward_row(y, dy, dx, stride, n);
                                 })};
        });
    return y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
    int64_t d = wrap_dim(dim, x.dim(), "log_softmax");
    check_floating(x, "log_softmax");
    Tensor y = softmax_forward(x, d, true);
    // backward: dx = dy - e^y sum dy, row by row (softmax.h).
    if (needs_grad(x))
        attach(y, "LogSoftmaxBackward0", {x}, [ys = SavedTensor(y), d](const Tensor& dout) -> Grads {
            return {row_backward(ys.get(), dout, d, "log_softmax",
                                 []<typename T>(const T* y, const T* dy, T* dx, int64_t stride, int64_t n) {
                                     log_softmax_backward_row(y, dy, dx, stride, n);
                                 })};
        });
    return y;
}

// ---- scaled_masked_softmax: attention's three lines in one pass ----------------------------

namespace {

// Row r of a mask expanded to x's shape (..., n): row r over the leading
// dims, through the mask's strides (0 along the broadcast dims); null
// without a mask.
const bool* mask_row(const Tensor& m, int64_t r) {
    if (!m.defined()) return nullptr;
    const size_t lead = static_cast<size_t>(m.dim() - 1);
    return m.data_ptr<bool>() + offset_of(r, std::span(m.shape()).first(lead), std::span(m.strides()).first(lead));
}

// The stride along a mask's rows (0 without one).
int64_t mask_step(const Tensor& m) { return m.defined() ? m.stride(-1) : 0; }

// forward over `rows` contiguous rows of n; the fast copy when the fast
// kernels are on (core/kernels/dispatch.h).
template <typename T>
void masked_forward(const T* x, T* y, int64_t rows, int64_t n, const Tensor& mask, T s) {
    if constexpr (kFastKernelsBuilt) {
        if (use_fast_kernels()) return fast::scaled_masked_softmax_forward(x, y, rows, n, mask, s);
    }
    parallel_for(0, rows, grain_for(n), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r)
            scaled_masked_softmax_row(x + r * n, y + r * n, n, mask_row(mask, r), mask_step(mask), s);
    });
}

template <typename T>
void masked_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t n, const Tensor& mask, T s) {
    if constexpr (kFastKernelsBuilt) {
        if (use_fast_kernels()) return fast::scaled_masked_softmax_backward(y, dy, dx, rows, n, mask, s);
    }
    parallel_for(0, rows, grain_for(n), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r)
            scaled_masked_softmax_backward_row(y + r * n, dy + r * n, dx + r * n, n, mask_row(mask, r), mask_step(mask),
                                               s);
    });
}

} // namespace

Tensor scaled_masked_softmax(const Tensor& x, const Tensor& masked_out, double scale) {
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
    Tensor m; // masked_out expanded to x's shape, a view
    if (masked_out.defined()) {
        if (masked_out.dtype() != kBool)
            fail<DTypeError>(name, "the mask (masked_out) must be a bool tensor, true where masked out, got ",
                             dtype_name(masked_out.dtype()), " of shape ", masked_out.shape(), " for input ",
                             x.shape());
        if (broadcast_shapes(x.shape(), masked_out.shape(), name) != x.shape())
            fail<ShapeError>(name, "the mask (masked_out) of shape ", masked_out.shape(),
                             " does not broadcast to the input's shape ", x.shape());
        m = masked_out.expand(x.shape());
    }
    const int64_t n = x.size(-1);
    Tensor xc = contiguous_data(x);
    Tensor y = empty_for(name, x.shape(), x.dtype());
    // forward, per row of n: y = x * s; y = -inf where masked;
    // then softmax in place (softmax.h). (With n = 0 there is nothing to
    // compute, nor a row to index.)
    if (n > 0)
        dispatch_floating(x.dtype(), name, [&]<typename T>(TypeTag<T>) {
            const T s = static_cast<T>(scale); // cast first, as x * 0.125 on float32 does
            masked_forward(xc.data_ptr<T>(), y.data_ptr<T>(), x.numel() / n, n, m, s);
        });
    // backward, per row: softmax's, then the mask's, then the scale's, as
    // the three ops one by one would (softmax.h).
    if (needs_grad(x))
        attach(y, "ScaledMaskedSoftmaxBackward", {x},
               [ys = SavedTensor(y), ms = SavedTensor(m), scale, n](const Tensor& dout) -> Grads {
                   const Tensor& yv = ys.get();
                   const Tensor& mv = ms.get(); // throws if the mask changed in place since
                   Tensor dy = contiguous_data(dout);
                   Tensor dx = empty_for("scaled_masked_softmax", yv.shape(), yv.dtype());
                   if (n > 0)
                       dispatch_floating(yv.dtype(), "scaled_masked_softmax", [&]<typename T>(TypeTag<T>) {
                           masked_backward(yv.data_ptr<T>(), dy.data_ptr<T>(), dx.data_ptr<T>(), yv.numel() / n, n, mv,
                                           static_cast<T>(scale));
                       });
                   return {dx};
               });
    return y;
}

} // namespace ember
