// softmax and log_softmax along any dim, each a fused primitive with its own
// backward; and scaled_masked_softmax, attention's scale, causal mask and
// softmax in one pass each way, with the bits of the three ops one by one.
//
// All subtract the row's max before exponentiating, so large logits cannot
// overflow: softmax(x) = e^(x - m) / sum e^(x - m) is the same function for
// any m. A row that is all -inf (fully masked) gives NaN, as in PyTorch.
// docs/softmax.md derives the backward passes. Tests: tests/test_softmax.cpp.
#include <cmath>
#include <limits>
#include <vector>

#include "autograd.h"
#include "exponential.h"
#include "loops.h"
#include "ops.h"
#include "shape.h"
#include "vectorize.h"

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
        if (s.inner == 1) // rows along the last dim: contiguous, one after another
            for (int64_t r = b; r < e; ++r) fn(r * s.size, 1, s.size);
        else
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

// softmax_row over `rows` contiguous rows of n (out may be x), with the same
// bits. Attention's rows are short (T = 8 at the tiny config), so the
// exponentials of several rows go through one buffer: the vectorised loop
// then runs long enough to pay for itself.
template <typename T>
EMBER_VECTOR_CLONES void softmax_rows(const T* x, T* out, int64_t rows, int64_t n) {
    constexpr int64_t kBuffer = 256;
    if (n == 0 || n > kBuffer / 2) {
        for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * n, out + r * n, 1, n, false);
        return;
    }
    const int64_t block = kBuffer / n;
    T e[kBuffer], m[kBuffer];
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
        const int64_t nr = std::min(block, rows - r0);
        const T* xb = x + r0 * n;
        T* ob = out + r0 * n;
        for (int64_t r = 0; r < nr; ++r) {
            T mx = -std::numeric_limits<T>::infinity();
            for (int64_t i = 0; i < n; ++i) mx = std::max(mx, xb[r * n + i]);
            m[r] = mx;
        }
        for (int64_t r = 0; r < nr; ++r)
            for (int64_t i = 0; i < n; ++i) e[r * n + i] = xb[r * n + i] - m[r];
        for (int64_t j = 0; j < nr * n; ++j) e[j] = exponential(e[j]);
        for (int64_t r = 0; r < nr; ++r) {
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += e[r * n + i];
            const T scale = T(1) / static_cast<T>(sum);
            for (int64_t i = 0; i < n; ++i) ob[r * n + i] = e[r * n + i] * scale;
        }
    }
}

// forward: the softmax (log = false) or log_softmax (log = true) of x along dim.
Tensor softmax_forward(const Tensor& x_in, int64_t dim, bool log) {
    Tensor x = contiguous_data(x_in);
    Tensor out = empty(x.shape(), x.dtype());
    dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>(TypeTag<T>) {
        const T* px = x.data_ptr<T>();
        T* po = out.data_ptr<T>();
        if (!log && dim == x.dim() - 1) { // contiguous rows
            const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
            parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1)),
                         [&](int64_t b, int64_t e) { softmax_rows(px + b * n, po + b * n, e - b, n); });
        } else {
            for_each_row(x.shape(), dim, [&](int64_t base, int64_t stride, int64_t n) {
                softmax_row(px + base, po + base, stride, n, log);
            });
        }
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
                for (int64_t i = 0; i < n; ++i) dx[i * s] = g[i * s] - exponential(y[i * s]) * total;
            })};
        });
    return y;
}

// ---- scaled_masked_softmax: attention's three lines in one pass ----------------------------

namespace {

// The rows of a mask already expanded to x's shape (undefined: nothing is
// masked). Row r's index splits over the leading dims like a multi-digit
// number; broadcast dims (stride 0) move nothing, so the pattern of mask
// rows repeats with the span of the outermost dim that does move: for
// attention's (T,T) mask expanded to (B,NH,T,T), every T rows. Where each
// row of one period starts is worked out once (a division per dim per row,
// which per row of 8 would cost as much as the row's arithmetic); the loops
// then step through the period.
struct MaskRows {
    const bool* data = nullptr;
    int64_t step = 0;             // stride along a row
    std::vector<int64_t> offsets; // row r starts at data + offsets[r % period]

    explicit MaskRows(const Tensor& m) {
        if (!m.defined()) return;
        data = m.data_ptr<bool>();
        step = m.strides().back();
        struct Dim {
            int64_t rows_per_step, size, stride;
        };
        std::vector<Dim> dims; // the dims that move, innermost first
        int64_t rows = 1;
        for (int64_t d = m.dim() - 2; d >= 0; --d) {
            if (m.strides()[d] != 0) dims.push_back({rows, m.shape()[d], m.strides()[d]});
            rows *= m.shape()[d];
        }
        const int64_t period = dims.empty() ? 1 : dims.back().rows_per_step * dims.back().size;
        offsets.assign(static_cast<size_t>(period), 0);
        for (int64_t r = 0; r < period; ++r)
            for (const Dim& d : dims) offsets[r] += r / d.rows_per_step % d.size * d.stride;
    }
    int64_t period() const { return static_cast<int64_t>(offsets.size()); }

    // Calls f(r, mask_row) for the rows r in [begin, end), stepping through
    // the period instead of dividing; mask_row is null when nothing is masked.
    template <typename F>
    void for_rows(int64_t begin, int64_t end, const F& f) const {
        if (!data) {
            for (int64_t r = begin; r < end; ++r) f(r, static_cast<const bool*>(nullptr));
            return;
        }
        int64_t j = begin % period();
        for (int64_t r = begin; r < end; ++r) {
            f(r, data + offsets[j]);
            if (++j == period()) j = 0;
        }
    }
};

// The backward over rows [begin, end) of n contiguous elements: dx from the
// saved output y and dy, in the order the three unfused ops' backwards would
// compute it.
template <typename T>
EMBER_VECTOR_CLONES void scaled_masked_softmax_backward_rows(const T* y, const T* dy, T* dx, int64_t begin,
                                                             int64_t end, int64_t n, const MaskRows& masks, T s,
                                                             ScaleOp op) {
    masks.for_rows(begin, end, [&](int64_t r, const bool* mr) {
        const T *yr = y + r * n, *gr = dy + r * n;
        T* dr = dx + r * n;
        T dot = 0;
        for (int64_t i = 0; i < n; ++i) dot += gr[i] * yr[i];
        if (op == ScaleOp::divide)
            for (int64_t i = 0; i < n; ++i) dr[i] = yr[i] * (gr[i] - dot) / s;
        else
            for (int64_t i = 0; i < n; ++i) dr[i] = yr[i] * (gr[i] - dot) * s;
        if (mr)
            for (int64_t i = 0; i < n; ++i) dr[i] = mr[i * masks.step] ? T(0) : dr[i];
    });
}

} // namespace

Tensor scaled_masked_softmax(const Tensor& x, const Tensor& mask, double scale, ScaleOp op) {
    const char* name = "scaled_masked_softmax";
    if (!x.is_floating_point())
        fail<DTypeError>(name, "needs a floating point tensor, got ", dtype_name(x.dtype()), " of shape ", x.shape());
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
            fail<ShapeError>(name, "mask of shape ", mask.shape(), " does not broadcast to the input's shape ", x.shape());
        m = mask.expand(x.shape());
    }
    const int64_t n = x.size(-1);
    Tensor xc = contiguous_data(x);
    Tensor y = empty(x.shape(), x.dtype());
    // forward, per row of n: y = x op s, or -inf where masked; then softmax in
    // place. (With n = 0 there is nothing to compute, nor a row to index.)
    if (n > 0) dispatch_floating(x.dtype(), name, [&]<typename T>(TypeTag<T>) {
        const T* px = xc.data_ptr<T>();
        T* py = y.data_ptr<T>();
        const T s = static_cast<T>(scale); // cast first, as x * 0.125 on float32 does
        const MaskRows masks(m);
        const int64_t rows = x.numel() / n;
        const int64_t block = std::max<int64_t>(1, 1024 / n); // rows filled, then softmaxed, while in L1
        constexpr T kMasked = -std::numeric_limits<T>::infinity();
        parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / n), [&](int64_t b, int64_t e) {
            for (int64_t r0 = b; r0 < e; r0 += block) {
                const int64_t r1 = std::min(e, r0 + block);
                // Scale the block in one loop, then mask row by row.
                const T* xb = px + r0 * n;
                T* yb = py + r0 * n;
                const int64_t len = (r1 - r0) * n;
                if (op == ScaleOp::divide)
                    for (int64_t j = 0; j < len; ++j) yb[j] = xb[j] / s;
                else
                    for (int64_t j = 0; j < len; ++j) yb[j] = xb[j] * s;
                if (masks.data)
                    masks.for_rows(r0, r1, [&](int64_t r, const bool* mr) {
                        T* yr = py + r * n;
                        for (int64_t i = 0; i < n; ++i) yr[i] = mr[i * masks.step] ? kMasked : yr[i];
                    });
                softmax_rows(yb, yb, r1 - r0, n);
            }
        });
    });
    // backward, per row: softmax's dS = y (dy - sum dy y); the mask's
    // backward zeroes dS where masked; the scale's multiplies (or divides)
    // by s. The same float operations in the same order as the three ops
    // one by one, so the bits agree too.
    if (needs_grad(x))
        attach(y, "ScaledMaskedSoftmaxBackward", {x},
               [ys = SavedTensor(y), ms = SavedTensor(m), scale, op, n](const Tensor& dout) -> Grads {
                   const Tensor& yv = ys.get();
                   const MaskRows masks(ms.get()); // get() throws if the mask changed in place since
                   Tensor g = contiguous_data(dout);
                   Tensor dx = empty(yv.shape(), yv.dtype());
                   if (n > 0) dispatch_floating(yv.dtype(), "scaled_masked_softmax", [&]<typename T>(TypeTag<T>) {
                       const T* pyv = yv.data_ptr<T>();
                       const T* pg = g.data_ptr<T>();
                       T* pd = dx.data_ptr<T>();
                       parallel_for(0, yv.numel() / n, std::max<int64_t>(1, kElementwiseGrain / n),
                                    [&](int64_t b, int64_t e) {
                                        scaled_masked_softmax_backward_rows(pyv, pg, pd, b, e, n, masks,
                                                                            static_cast<T>(scale), op);
                                    });
                   });
                   return {dx};
               });
    return y;
}

} // namespace ember
