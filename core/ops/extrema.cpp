// The reductions that pick elements: max, min, argmax, argmin over all
// elements or along a dim, and topk; each gradient goes back to the
// elements picked. NaN counts as the largest and the first occurrence wins
// ties, as in PyTorch. (The sums: reduce.cpp, whose reduce.h both share.)
// Tests: tests/test_reduce.cpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/ops/ops.h"
#include "core/ops/reduce.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::contiguous_data;
using internal::DimSplit;
using internal::empty_for;
using internal::fold_reduced;
using internal::offset_of;
using internal::reduce_geometry;
using internal::ReduceGeometry;
using internal::split_at;

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
        fold_reduced<T, Best<T>>(
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

} // namespace ember
