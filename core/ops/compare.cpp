// Comparisons that make bool masks, and the ops that select with masks:
// masked_fill (out of place and in place) and where.
//
// The fill value is converted to the tensor's dtype (2.7 fills an int64
// tensor with 2, as in PyTorch). A mask is a bool tensor that broadcasts against what it selects from, as in
// the causal mask of attention: wei.masked_fill(tril == 0, -inf). Gradients
// flow only to the elements that were not replaced.
// Tests: tests/test_compare.cpp.
#include "core/autograd/autograd.h"
#include "core/loops/map.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::broadcast_strides;
using internal::bump_version;
using internal::check_writable;
using internal::converted;
using internal::data_of;
using internal::empty_for;
using internal::map_binary;
using internal::map_ternary;
using internal::parallel_for_each_run;
using internal::StridedLayout;
using internal::unaliased;

// ---- comparisons ---------------------------------------------------------------------------

namespace {

// A bool mask of pred(a, b) over the broadcast shape, comparing in the promoted dtype.
template <typename Pred>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, Pred pred) {
    Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
    DType dtype = result_type(a, b);
    Tensor out = empty_for(op, shape, kBool);
    Tensor ca = converted(a, dtype);
    Tensor cb = converted(b, dtype);
    dispatch(dtype, [&]<typename T>(TypeTag<T>) {
        map_binary<bool, T>(out, ca, cb, [pred](T x, T y) { return pred(x, y); });
    });
    return out;
}

Tensor as_tensor(Scalar s, const Tensor& like) { return scalar_tensor(s, s.result_type(like.dtype())); }

} // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
    return compare("eq", a, b, [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
    return compare("ne", a, b, [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
    return compare("lt", a, b, [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
    return compare("le", a, b, [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
    return compare("gt", a, b, [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
    return compare("ge", a, b, [](auto x, auto y) { return x >= y; });
}
Tensor eq(const Tensor& a, Scalar b) { return eq(a, as_tensor(b, a)); }
Tensor ne(const Tensor& a, Scalar b) { return ne(a, as_tensor(b, a)); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, as_tensor(b, a)); }
Tensor le(const Tensor& a, Scalar b) { return le(a, as_tensor(b, a)); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, as_tensor(b, a)); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, as_tensor(b, a)); }

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
    NoGradGuard no_grad;
    Tensor x = a.to(kFloat64), y = b.to(kFloat64);
    Tensor diff = abs(x - y);
    Tensor bound = abs(y) * rtol + atol;
    // Infinities of the same sign are close; their difference is NaN.
    Tensor ok = where(eq(x, y), full_like(diff, 0.0), diff) <= bound;
    return sum(ok).item<int64_t>() == ok.numel();
}

// ---- where, masked_fill ---------------------------------------------------------------------

namespace {

void check_mask(const char* op, const Tensor& mask, const Shape& other) {
    if (mask.dtype() != kBool)
        fail<DTypeError>(op, "the mask must be a bool tensor (from a comparison such as tril == 0), got ",
                         dtype_name(mask.dtype()), " of shape ", mask.shape(), " for a tensor of shape ", other);
}

// out = condition ? a : b over the broadcast shape of all three, in `dtype`.
Tensor select_where(const char* op, const Tensor& condition, const Tensor& a, const Tensor& b, DType dtype) {
    Shape shape = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), op), b.shape(), op);
    Tensor out = empty_for(op, shape, dtype);
    Tensor ca = converted(a, dtype);
    Tensor cb = converted(b, dtype);
    dispatch(dtype, [&]<typename T>(TypeTag<T>) {
        map_ternary<T, bool, T>(out, condition, ca, cb, [](bool c, T x, T y) { return c ? x : y; });
    });
    return out;
}

} // namespace

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
    check_mask("where", condition, broadcast_shapes(a.shape(), b.shape(), "where"));
    Tensor out = select_where("where", condition, a, b, result_type(a, b));
    // forward: out = cond ? a : b, so da = dout where cond (else 0) and
    // db = dout where not cond, each summed to its shape.
    if (needs_grad(a, b))
        attach(out, "WhereBackward0", {condition, a, b},
               [cond = SavedTensor(condition), sa = a.shape(), sb = b.shape()](const Tensor& dout) -> Grads {
                   const Tensor& c = cond.get();
                   return {Tensor(), sum_to(where(c, dout, 0), sa), sum_to(masked_fill(dout, c, 0), sb)};
               });
    return out;
}

Tensor where(const Tensor& condition, const Tensor& a, Scalar b) { return where(condition, a, as_tensor(b, a)); }

namespace {

// A value written into an int64 tensor must fit it (Scalar::fits), as PyTorch checks.
void check_fits(const char* op, Scalar value, const Tensor& x) {
    if (!value.fits(x.dtype()))
        fail<ValueError>(op, "value ", value.to_double(), " cannot be converted to ", dtype_name(x.dtype()),
                         " without overflow (tensor ", x.shape(), ")");
}

} // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
    check_mask("masked_fill", mask, x.shape());
    check_fits("masked_fill", value, x);
    Tensor out = select_where("masked_fill", mask, scalar_tensor(value, x.dtype()), x, x.dtype());
    // forward: out = mask ? value : x, so dx = dout where the mask is false, else 0.
    if (needs_grad(x))
        attach(out, "MaskedFillBackward0", {x, mask},
               [m = SavedTensor(mask), sx = x.shape()](const Tensor& dout) -> Grads {
                   return {sum_to(masked_fill(dout, m.get(), 0), sx), Tensor()};
               });
    return out;
}

Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
    check_mask("masked_fill_", mask, shape());
    check_fits("masked_fill_", value, *this);
    if (broadcast_shapes(shape(), mask.shape(), "masked_fill_") != shape())
        fail<ShapeError>("masked_fill_", "mask of shape ", mask.shape(), " does not broadcast to the shape ", shape(),
                         " of the tensor it fills");
    bool grad = needs_grad(*this);
    check_inplace(*this, "masked_fill_", grad);
    check_writable(*this, "masked_fill_");
    Tensor m_src = unaliased(mask, *this); // a mask that views self must be read before self changes
    dispatch(dtype(), [&]<typename T>(TypeTag<T>) {
        T v = value.to<T>();
        Shape sm = broadcast_strides(m_src, shape());
        StridedLayout<2> layout(shape(), {&strides(), &sm});
        T* data = data_of<T>(*this);
        const bool* m = data_of<bool>(m_src);
        parallel_for_each_run(layout, numel(), [&](const auto& off, const auto& step, int64_t n) {
            for (int64_t i = 0; i < n; ++i)
                if (m[off[1] + i * step[1]]) data[off[0] + i * step[0]] = v;
        });
    });
    bump_version(*this);
    // forward: self = mask ? value : self, so dself = dout where the mask is false.
    if (grad)
        attach_inplace(*this, "MaskedFillBackward0", {*this, mask},
                       [m = SavedTensor(mask)](const Tensor& dout) -> Grads {
                           return {ember::masked_fill(dout, m.get(), 0), Tensor()};
                       });
    return *this;
}

} // namespace ember
