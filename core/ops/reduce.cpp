// Sums: sum, mean, var; and sum_to, which sums a broadcast gradient back
// down to an input's shape. (max, min, argmax, argmin and topk, the
// reductions that pick elements: extrema.cpp.)
//
// Reducing dims of x splits its dims into kept ones (one output element per
// index) and reduced ones (folded into that element): reduce.h. float32 sums
// accumulate in double. A reduction to one value over many elements is cut
// into chunks of fixed size, folded in parallel and merged in order, so the
// result does not depend on the thread count. Tests: tests/test_reduce.cpp.
#include "core/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/loops/arithmetic.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

namespace internal {

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

} // namespace internal

using internal::add_op;
using internal::check_floating;
using internal::converted;
using internal::data_of;
using internal::empty_for;
using internal::fold_reduced;
using internal::kFastKernelsBuilt;
using internal::reduce_geometry;
using internal::ReduceGeometry;
using internal::use_fast_kernels;
namespace fast = internal::fast;

namespace {

// The accumulator type of a sum: double for floats, int64 for integers.
template <typename T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// True when x is contiguous and every reduced dim comes before every kept
// one (dims of size 1 aside): x is then g.inner rows of g.outer elements and
// output o sums column o. A bias gradient, dout summed over (B,T), is one,
// which the fast kernel fast::column_sum (core/kernels/column_sum.cpp) sums faster,
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

// The fast kernel's column sum of cx into out, where it is built and on;
// false otherwise. A template so that the reference build, where `built` is
// false, never instantiates the call (at -O0 the lambda below would still be
// compiled, and fast::column_sum is not in that build).
template <bool built = kFastKernelsBuilt>
bool column_sum_fast(const Tensor& cx, const ReduceGeometry& g, const Tensor& out) {
    if constexpr (built) {
        if (!use_fast_kernels()) return false;
        dispatch_floating(cx.dtype(), "sum", [&]<typename T>(TypeTag<T>) {
            fast::column_sum(data_of<T>(cx), g.inner, g.outer, out.data_ptr<T>());
        });
        return true;
    } else {
        return false;
    }
}

// The sum over `dims` in `dtype`. The geometry is taken from the tensor the
// loop reads (a converted copy has its own strides).
Tensor sum_in(const Tensor& x, const Shape& dims, bool keepdim, DType dtype) {
    Tensor cx = converted(x, dtype);
    ReduceGeometry g = reduce_geometry(cx, dims, keepdim, "sum");
    Tensor out = empty_for("sum", g.out_shape, dtype);
    if (is_floating(dtype) && sums_leading_rows(cx, g) && column_sum_fast(cx, g, out)) return out;
    dispatch_numeric(dtype, "sum", [&]<typename T>(TypeTag<T>) {
        using Acc = SumAcc<T>;
        T* o = out.data_ptr<T>();
        fold_reduced<T, Acc>(
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
    Tensor out = sum_in(x, dims, keepdim, sum_type(x.dtype()));
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
    Tensor out = sum_in(x, dims, keepdim, x.dtype());
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
    // PyTorch's divisor, max(N - c, 0): a variance of fewer elements than
    // that is 0/0, NaN (of no element too, with or without the correction).
    double divisor = std::max(n - (unbiased ? 1.0 : 0.0), 0.0);
    // Two passes in double: the mean, then the sum of squared deviations from
    // it (more accurate than accumulating x and x^2 together).
    Tensor out;
    {
        NoGradGuard no_grad;
        Tensor xd = converted(x, kFloat64);
        Tensor mu = div(sum_in(xd, dims, true, kFloat64), n);
        Tensor dev = sub(xd, mu);
        Tensor sq = mul(dev, dev);
        out = converted(div(sum_in(sq, dims, keepdim, kFloat64), divisor), x.dtype());
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
