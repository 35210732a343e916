// Reductions: sum, mean, var, max, min, argmax, argmin; and sum_to, which
// sums a broadcast gradient back down to an input's shape.
//
// Reducing dims of x splits its dims into kept ones (one output element per
// index) and reduced ones (folded into that element). float32 sums accumulate
// in double. A reduction to one value over many elements is cut into chunks of
// fixed size, folded in parallel and merged in order, so the result does not
// depend on the thread count. Tests: tests/test_reduce.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/loops/arithmetic.h"
#include "core/loops/map.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

namespace ember {

using namespace internal;

namespace {

// How reducing `dims` of a tensor splits it.
struct ReduceGeometry {
    Shape kept_shape, kept_strides;       // one output element per index of these
    Shape reduced_shape, reduced_strides; // folded into each output element
    Shape out_shape;                      // kept_shape, with 1s in place when keepdim
    Shape keepdim_shape;                  // out_shape as if keepdim were true
    int64_t outer = 1, inner = 1;         // numel of the kept and of the reduced dims
};

// `dims` empty means every dim, as in PyTorch.
ReduceGeometry reduce_geometry(const Tensor& x, const Shape& dims, bool keepdim, const char* op) {
    int64_t ndim = x.dim();
    std::vector<bool> reduce(std::max<int64_t>(ndim, 1), dims.empty());
    for (int64_t d : dims) {
        int64_t w = wrap_dim(d, ndim, op);
        if (reduce[w] && !dims.empty())
            fail<ValueError>(op, "dimension ", d, " appears twice in dims ", dims, " (shape ", x.shape(), ")");
        reduce[w] = true;
    }
    ReduceGeometry g;
    for (int64_t d = 0; d < ndim; ++d) {
        int64_t size = x.shape()[d];
        if (reduce[d]) {
            g.reduced_shape.push_back(size);
            g.reduced_strides.push_back(x.strides()[d]);
            g.inner *= size;
            g.keepdim_shape.push_back(1);
            if (keepdim) g.out_shape.push_back(1);
        } else {
            g.kept_shape.push_back(size);
            g.kept_strides.push_back(x.strides()[d]);
            g.outer *= size;
            g.keepdim_shape.push_back(size);
            g.out_shape.push_back(size);
        }
    }
    return g;
}

// Elements per chunk of a one-output reduction (fixed, for determinism).
constexpr int64_t kChunk = 16384;

// Folds the reduced elements of every output element: acc = fold(acc, value,
// index) in order, index counting the reduced elements from 0; partial folds
// of one output are combined with merge; store(o, acc) writes output o.
template <typename T, typename Acc, typename Fold, typename Merge, typename Store>
void reduce_kernel(const Tensor& x, const ReduceGeometry& g, Acc init, Fold fold, Merge merge, Store store) {
    const T* data = data_of<T>(x);
    StridedLayout<1> inner_layout(g.reduced_shape, {&g.reduced_strides});
    auto fold_range = [&](const T* base, int64_t begin, int64_t end) {
        Acc acc = init;
        int64_t pos = begin;
        for_each_run(inner_layout, begin, end, [&](const auto& off, const auto& step, int64_t n) {
            const T* p = base + off[0];
            for (int64_t i = 0; i < n; ++i) acc = fold(acc, p[i * step[0]], pos + i);
            pos += n;
        });
        return acc;
    };

    if (g.outer == 1 && g.inner > kChunk) {
        int64_t nchunks = (g.inner + kChunk - 1) / kChunk;
        std::vector<Acc> partial(nchunks, init);
        parallel_for(0, nchunks, grain_for(kChunk), [&](int64_t b, int64_t e) {
            for (int64_t c = b; c < e; ++c)
                partial[c] = fold_range(data, c * kChunk, std::min(g.inner, (c + 1) * kChunk));
        });
        Acc acc = partial[0];
        for (int64_t c = 1; c < nchunks; ++c) acc = merge(acc, partial[c]);
        store(0, acc);
        return;
    }
    parallel_for(0, g.outer, grain_for(g.inner), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
            // Output o's first reduced element: o over the kept dims.
            store(o, fold_range(data + offset_of(o, g.kept_shape, g.kept_strides), 0, g.inner));
        }
    });
}

// The accumulator type of a sum: double for floats, int64 for integers.
template <typename T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// True when x is contiguous and every reduced dim comes before every kept
// one (dims of size 1 aside): x is then g.inner rows of g.outer elements and
// output o sums column o. A bias gradient, dout summed over (B,T), is one,
// which the fast fast::column_sum (core/kernels/column_sum.cpp) sums faster,
// with the same bits.
bool sums_leading_rows(const Tensor& x, const ReduceGeometry& g) {
    if (!x.is_contiguous() || g.outer < 2 || g.inner < 2) return false;
    int64_t kept_extent = 1, reduced_stride = INT64_MAX;
    for (size_t d = 0; d < g.kept_shape.size(); ++d)
        if (g.kept_shape[d] > 1) kept_extent = std::max(kept_extent, g.kept_shape[d] * g.kept_strides[d]);
    for (size_t d = 0; d < g.reduced_shape.size(); ++d)
        if (g.reduced_shape[d] > 1) reduced_stride = std::min(reduced_stride, g.reduced_strides[d]);
    return kept_extent <= reduced_stride;
}

// The sum over `dims` in `dtype`. The geometry is taken from the tensor the
// kernel reads (a converted copy has its own strides).
Tensor sum_kernel(const Tensor& x, const Shape& dims, bool keepdim, DType dtype) {
    Tensor cx = converted(x, dtype);
    ReduceGeometry g = reduce_geometry(cx, dims, keepdim, "sum");
    Tensor out = empty_for("sum", g.out_shape, dtype);
    if constexpr (kFastKernelsBuilt) {
        if (is_floating(dtype) && sums_leading_rows(cx, g) && use_fast_kernels()) {
            dispatch_floating(dtype, "sum", [&]<typename T>(TypeTag<T>) {
                fast::column_sum(data_of<T>(cx), g.inner, g.outer, out.data_ptr<T>());
            });
            return out;
        }
    }
    dispatch_numeric(dtype, "sum", [&]<typename T>(TypeTag<T>) {
        using Acc = SumAcc<T>;
        T* o = out.data_ptr<T>();
        reduce_kernel<T, Acc>(
            cx, g, Acc(0), [](Acc acc, T v, int64_t) { return add_op<Acc>(acc, Acc(v)); },
            [](Acc a, Acc b) { return add_op<Acc>(a, b); }, [o](int64_t i, Acc acc) { o[i] = static_cast<T>(acc); });
    });
    return out;
}

// Integer sums stay int64 (bool counts as integer); floats keep their dtype.
DType sum_type(DType dtype) { return is_floating(dtype) ? dtype : kInt64; }

} // namespace

// ---- sum, mean --------------------------------------------------------------------------------

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
    ReduceGeometry g = reduce_geometry(x, dims, keepdim, "sum");
    Tensor out = sum_kernel(x, dims, keepdim, sum_type(x.dtype()));
    // forward: out = sum of x over dims, so every x element gets dout of its
    // output element: dx = dout (with the reduced dims back as 1s) expanded.
    if (needs_grad(x))
        attach(out, dims.empty() ? "SumBackward0" : "SumBackward1", {x},
               [in = x.shape(), k = g.keepdim_shape](const Tensor& dout) -> Grads {
                   return {dout.reshape(k).expand(in)};
               });
    return out;
}
Tensor sum(const Tensor& x) { return sum(x, Shape{}, false); }
Tensor sum(const Tensor& x, int64_t dim, bool keepdim) { return sum(x, Shape{dim}, keepdim); }

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
    check_floating(x, "mean");
    ReduceGeometry g = reduce_geometry(x, dims, keepdim, "mean");
    Tensor out = sum_kernel(x, dims, keepdim, x.dtype());
    out.div_(static_cast<double>(g.inner)); // an empty reduction gives 0/0 = nan, as PyTorch
    // forward: out = sum(x) / N, so dx = dout / N expanded over the reduced dims.
    if (needs_grad(x))
        attach(out, dims.empty() ? "MeanBackward0" : "MeanBackward1", {x},
               [in = x.shape(), k = g.keepdim_shape, n = g.inner](const Tensor& dout) -> Grads {
                   return {div(dout, static_cast<double>(n)).reshape(k).expand(in)};
               });
    return out;
}
Tensor mean(const Tensor& x) { return mean(x, Shape{}, false); }
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) { return mean(x, Shape{dim}, keepdim); }

// ---- var -------------------------------------------------------------------------------------------

Tensor var(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
    check_floating(x, "var");
    ReduceGeometry g = reduce_geometry(x, dims, keepdim, "var");
    double n = static_cast<double>(g.inner);
    double divisor = n - (unbiased ? 1.0 : 0.0);
    // Two passes in double: the mean, then the sum of squared deviations from
    // it (more accurate than accumulating x and x^2 together).
    Tensor out;
    {
        NoGradGuard no_grad;
        Tensor xd = converted(x, kFloat64);
        Tensor mu = div(sum_kernel(xd, dims, true, kFloat64), n);
        Tensor dev = sub(xd, mu);
        Tensor sq = mul(dev, dev);
        out = converted(div(sum_kernel(sq, dims, keepdim, kFloat64), divisor), x.dtype());
    }
    // forward: out = sum((x - mean)^2) / (N - c), and the mean's own
    // derivative sums to zero against (x - mean), so dx = dout * 2 (x - mean) / (N - c).
    if (needs_grad(x))
        attach(out, "VarBackward0", {x},
               [xs = SavedTensor(x), dims, divisor, k = g.keepdim_shape](const Tensor& dout) -> Grads {
                   const Tensor& xv = xs.get();
                   Tensor centered = sub(xv, mean(xv, dims, true));
                   return {mul(centered, div(dout.reshape(k), divisor / 2.0))};
               });
    return out;
}
Tensor var(const Tensor& x) { return var(x, Shape{}, true, false); }
Tensor var(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) { return var(x, Shape{dim}, unbiased, keepdim); }

// ---- max, min, argmax, argmin -----------------------------------------------------------------------

namespace {

// The running best of a max or min: its value and the index where it was seen.
template <typename T>
struct Best {
    T value;
    int64_t index = -1;
};

// Folds toward the max (greater = true) or min. NaN beats everything, and
// the first occurrence wins ties, as in PyTorch.
template <typename T>
Best<T> better(Best<T> best, T v, int64_t i, bool greater) {
    if (best.index < 0) return {v, i};
    bool best_nan = best.value != best.value;
    if (best_nan) return best;
    if (v != v || (greater ? v > best.value : v < best.value)) return {v, i};
    return best;
}

// Values and indices of the max or min over `dims` (empty: all).
ValuesIndices extreme(const Tensor& x, const Shape& dims, bool keepdim, bool greater, const char* op) {
    if (x.dtype() == kBool) fail<DTypeError>(op, "is not supported on bool tensors (shape ", x.shape(), ")");
    ReduceGeometry g = reduce_geometry(x, dims, keepdim, op);
    if (g.inner == 0)
        fail<IndexError>(op, "cannot take the ", greater ? "max" : "min", " of an empty dimension (shape ", x.shape(),
                         ")");
    Tensor values = empty_for(op, g.out_shape, x.dtype());
    Tensor indices = empty_for(op, g.out_shape, kInt64);
    dispatch_numeric(x.dtype(), op, [&]<typename T>(TypeTag<T>) {
        T* v = values.data_ptr<T>();
        int64_t* idx = indices.data_ptr<int64_t>();
        reduce_kernel<T, Best<T>>(
            x, g, Best<T>{T(0), -1}, [greater](Best<T> b, T value, int64_t i) { return better(b, value, i, greater); },
            [greater](Best<T> a, Best<T> b) { return b.index < 0 ? a : better(a, b.value, b.index, greater); },
            [v, idx](int64_t o, Best<T> b) {
                v[o] = b.value;
                idx[o] = b.index;
            });
    });
    return {values, indices};
}

// The gradient of an op that picked entries along `dim` (max/min over a dim,
// topk): dout's entries go back to the positions `indices` name, zero
// elsewhere. dout and indices have `index_shape`: `in` with dim's size
// replaced by the number picked.
Tensor scatter_along_dim(const Tensor& dout, const Tensor& indices, int64_t dim, const Shape& in,
                         const Shape& index_shape) {
    Tensor dx = zeros(in, dout.dtype());
    Tensor d = dout.reshape(index_shape).contiguous();
    Tensor idx = indices.reshape(index_shape).contiguous();
    dispatch_floating(dx.dtype(), "backward", [&]<typename T>(TypeTag<T>) {
        T* px = dx.data_ptr<T>();
        const T* pd = d.data_ptr<T>();
        const int64_t* pi = idx.data_ptr<int64_t>();
        // Element o of dout lands at o's coordinates with the one along dim
        // replaced by its index: the offset of o's coordinates without dim,
        // plus the index times dim's stride.
        Shape other_strides = dx.strides();
        other_strides[dim] = 0;
        for (int64_t o = 0; o < d.numel(); ++o)
            px[offset_of(o, index_shape, other_strides) + pi[o] * dx.strides()[dim]] += pd[o];
    });
    return dx;
}

ValuesIndices extreme_dim(const Tensor& x, int64_t dim, bool keepdim, bool greater, const char* op) {
    int64_t d = wrap_dim(dim, x.dim(), op);
    ValuesIndices r = extreme(x, Shape{d}, keepdim, greater, op);
    // forward: values = x at the chosen index along dim, so dx is dout placed
    // at those indices and zero elsewhere.
    if (needs_grad(x)) {
        Shape k = reduce_geometry(x, Shape{d}, true, op).keepdim_shape;
        attach(r.values, greater ? "MaxBackward0" : "MinBackward0", {x},
               [idx = SavedTensor(r.indices), d, in = x.shape(), k](const Tensor& dout) -> Grads {
                   return {scatter_along_dim(dout, idx.get(), d, in, k)};
               });
    }
    return r;
}

Tensor extreme_all(const Tensor& x, bool greater, const char* op) {
    Tensor out = extreme(x, Shape{}, false, greater, op).values;
    // forward: out = the largest (smallest) element. When several elements
    // tie for it, PyTorch shares dout evenly among them: dx = dout * mask / count.
    // If the result is NaN, the NaNs are the elements that "tie".
    if (needs_grad(x))
        attach(out, greater ? "MaxBackward1" : "MinBackward1", {x},
               [xs = SavedTensor(x), y = SavedTensor(out)](const Tensor& dout) -> Grads {
                   const Tensor& xv = xs.get();
                   bool nan = std::isnan(y.get().item<double>());
                   Tensor mask = (nan ? ne(xv, xv) : eq(xv, y.get())).to(dout.dtype());
                   return {mul(mask, div(dout, sum(mask)))};
               });
    return out;
}

} // namespace

Tensor max(const Tensor& x) { return extreme_all(x, true, "max"); }
Tensor min(const Tensor& x) { return extreme_all(x, false, "min"); }
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme_dim(x, dim, keepdim, true, "max"); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme_dim(x, dim, keepdim, false, "min"); }
Tensor argmax(const Tensor& x) { return extreme(x, Shape{}, false, true, "argmax").indices; }
Tensor argmin(const Tensor& x) { return extreme(x, Shape{}, false, false, "argmin").indices; }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
    return extreme(x, Shape{wrap_dim(dim, x.dim(), "argmax")}, keepdim, true, "argmax").indices;
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
    return extreme(x, Shape{wrap_dim(dim, x.dim(), "argmin")}, keepdim, false, "argmin").indices;
}

// ---- topk -------------------------------------------------------------------------------------------------

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
    if (x.dtype() == kBool) fail<DTypeError>("topk", "is not supported on bool tensors (shape ", x.shape(), ")");
    int64_t d = wrap_dim(dim, x.dim(), "topk");
    int64_t size = x.dim() == 0 ? 1 : x.shape()[d];
    if (k < 0 || k > size)
        fail<IndexError>("topk", "k = ", k, " is out of range for dimension ", dim, " of size ", size, " (shape ",
                         x.shape(), ")");
    Tensor xc = contiguous_data(x);
    Shape out_shape = x.shape();
    if (x.dim() > 0) out_shape[d] = k;
    Tensor values = empty_for("topk", out_shape, x.dtype());
    Tensor indices = empty_for("topk", out_shape, kInt64);
    DimSplit s = split_at(x.shape(), d);
    if (x.dim() == 0) s = DimSplit{};
    dispatch_numeric(x.dtype(), "topk", [&]<typename T>(TypeTag<T>) {
        const T* px = xc.data_ptr<T>();
        T* pv = values.data_ptr<T>();
        int64_t* pi = indices.data_ptr<int64_t>();
        // `before(a, b)`: element a ranks ahead of b. NaN ranks as the
        // largest, as in PyTorch; ties go to the lower index.
        auto before = [&](const T* row, int64_t stride, int64_t a, int64_t b) {
            T va = row[a * stride], vb = row[b * stride];
            bool na = va != va, nb = vb != vb;
            if (na || nb) return largest ? (na && !nb) || (na && nb && a < b) : (nb && !na) || (na && nb && a < b);
            if (va != vb) return largest ? va > vb : va < vb;
            return a < b;
        };
        parallel_for(0, s.outer * s.inner, grain_for(s.size), [&](int64_t b, int64_t e) {
            std::vector<int64_t> order(s.size);
            for (int64_t r = b; r < e; ++r) {
                int64_t o = r / s.inner, j = r % s.inner;
                const T* row = px + o * s.size * s.inner + j;
                for (int64_t i = 0; i < s.size; ++i) order[i] = i;
                std::partial_sort(order.begin(), order.begin() + k, order.end(),
                                  [&](int64_t a, int64_t c) { return before(row, s.inner, a, c); });
                for (int64_t i = 0; i < k; ++i) {
                    int64_t out = o * k * s.inner + i * s.inner + j;
                    pv[out] = row[order[i] * s.inner];
                    pi[out] = order[i];
                }
            }
        });
    });
    // forward: values = x at the picked indices, so dx is dout scattered back there.
    if (needs_grad(x))
        attach(values, "TopkBackward0", {x},
               [idx = SavedTensor(indices), d, in = x.shape(), out_shape](const Tensor& dout) -> Grads {
                   return {scatter_along_dim(dout, idx.get(), d, in, out_shape)};
               });
    return {values, indices};
}

// ---- sum_to --------------------------------------------------------------------------------------------

Tensor sum_to(const Tensor& x, const Shape& shape) {
    if (x.shape() == shape) return x;
    // Undo broadcasting: sum the leading dims that `shape` lacks, and the dims
    // where `shape` has 1 but x does not; then drop the leading dims.
    int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
    if (lead < 0)
        fail<ShapeError>("sum_to", "cannot sum a tensor of shape ", x.shape(), " to the larger shape ", shape);
    Shape dims;
    for (int64_t d = 0; d < x.dim(); ++d) {
        if (d < lead) dims.push_back(d);
        else if (shape[d - lead] == 1 && x.shape()[d] != 1) dims.push_back(d);
        else if (shape[d - lead] != x.shape()[d])
            fail<ShapeError>("sum_to", "shape ", x.shape(), " does not broadcast from ", shape);
    }
    if (dims.empty()) return x.reshape(shape);
    return sum(x, dims, true).reshape(shape);
}

} // namespace ember
