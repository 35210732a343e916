// Arithmetic: add, sub, mul, div, pow, outer; tensor with tensor (broadcast)
// and with scalars; the operators. (The in-place forms: inplace.cpp.)
//
// Result dtypes follow PyTorch: tensor-tensor ops promote (int64 + float32 is
// float32), a floating scalar lifts an integer tensor to float32, and div is
// true division (int64 / int64 is float32). A broadcast input's gradient is
// dout summed over the dims it was broadcast along (sum_to). Integer
// overflow wraps. Node names are the ones Python's torch prints (a scalar
// operand gives the same MulBackward0 as a tensor one). Tests:
// tests/test_binary.cpp.
#include <cmath>

#include "core/ops/binary.h"

#include "core/autograd/autograd.h"
#include "core/loops/arithmetic.h"
#include "core/loops/map.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::add_op;
using internal::check_not_bool_sub;
using internal::converted;
using internal::empty_for;
using internal::map_binary;
using internal::map_unary;
using internal::mul_op;
using internal::sub_op;
using internal::true_div_type;

namespace {

// out = f(a, b) over the broadcast shape, computed in `dtype`.
template <typename F>
Tensor elementwise(const char* op, const Tensor& a, const Tensor& b, DType dtype, F f) {
    Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
    Tensor out = empty_for(op, shape, dtype);
    Tensor ca = converted(a, dtype);
    Tensor cb = converted(b, dtype);
    dispatch(dtype, [&]<typename T>(TypeTag<T>) { map_binary<T, T>(out, ca, cb, [f](T x, T y) { return f(x, y); }); });
    return out;
}

// out = f(a, s) with the scalar cast to `dtype` first, as PyTorch does
// (x / 3.0 on float32 divides by float(3.0)).
template <typename F>
Tensor with_scalar(const char* op, const Tensor& a, Scalar s, DType dtype, F f) {
    Tensor out = empty_for(op, a.shape(), dtype);
    Tensor ca = converted(a, dtype);
    dispatch(dtype, [&]<typename T>(TypeTag<T>) {
        T v = s.to<T>();
        map_unary<T, T>(out, ca, [f, v](T x) { return f(x, v); });
    });
    return out;
}

} // namespace

// ---- add, sub ----------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b) {
    Tensor out = elementwise("add", a, b, result_type(a, b), [](auto x, auto y) { return add_op(x, y); });
    // forward: out = a + b, so da = dout and db = dout (each summed to its shape).
    if (needs_grad(a, b))
        attach(out, "AddBackward0", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& dout) -> Grads {
            return {sum_to(dout, sa), sum_to(dout, sb)};
        });
    return out;
}

Tensor add(const Tensor& a, Scalar b) {
    Tensor out = with_scalar("add", a, b, b.result_type(a.dtype()), [](auto x, auto y) { return add_op(x, y); });
    // forward: out = a + b, so da = dout.
    if (needs_grad(a)) attach(out, "AddBackward0", {a}, [](const Tensor& dout) -> Grads { return {dout}; });
    return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
    check_not_bool_sub("sub", result_type(a, b));
    Tensor out = elementwise("sub", a, b, result_type(a, b), [](auto x, auto y) { return sub_op(x, y); });
    // forward: out = a - b, so da = dout and db = -dout.
    if (needs_grad(a, b))
        attach(out, "SubBackward0", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& dout) -> Grads {
            return {sum_to(dout, sa), neg(sum_to(dout, sb))};
        });
    return out;
}

Tensor sub(const Tensor& a, Scalar b) {
    check_not_bool_sub("sub", b.result_type(a.dtype()));
    Tensor out = with_scalar("sub", a, b, b.result_type(a.dtype()), [](auto x, auto y) { return sub_op(x, y); });
    // forward: out = a - b, so da = dout.
    if (needs_grad(a)) attach(out, "SubBackward0", {a}, [](const Tensor& dout) -> Grads { return {dout}; });
    return out;
}

Tensor sub(Scalar a, const Tensor& b) {
    check_not_bool_sub("sub", a.result_type(b.dtype()));
    Tensor out = with_scalar("sub", b, a, a.result_type(b.dtype()), [](auto x, auto y) { return sub_op(y, x); });
    // forward: out = a - b, so db = -dout.
    if (needs_grad(b)) attach(out, "RsubBackward1", {b}, [](const Tensor& dout) -> Grads { return {neg(dout)}; });
    return out;
}

// ---- mul, div ------------------------------------------------------------------------------

Tensor mul(const Tensor& a, const Tensor& b) {
    Tensor out = elementwise("mul", a, b, result_type(a, b), [](auto x, auto y) { return mul_op(x, y); });
    // forward: out = a * b, so da = dout * b and db = dout * a. Each input is
    // saved only if the other one needs its gradient.
    if (needs_grad(a, b)) {
        bool need_a = a.requires_grad(), need_b = b.requires_grad();
        attach(out, "MulBackward0", {a, b},
               [sa = a.shape(), sb = b.shape(), a_saved = SavedTensor(need_b ? a : Tensor()),
                b_saved = SavedTensor(need_a ? b : Tensor())](const Tensor& dout) -> Grads {
                   Tensor da, db;
                   if (b_saved.get().defined()) da = sum_to(mul(dout, b_saved.get()), sa);
                   if (a_saved.get().defined()) db = sum_to(mul(dout, a_saved.get()), sb);
                   return {da, db};
               });
    }
    return out;
}

Tensor mul(const Tensor& a, Scalar b) {
    Tensor out = with_scalar("mul", a, b, b.result_type(a.dtype()), [](auto x, auto y) { return mul_op(x, y); });
    // forward: out = a * b, so da = dout * b.
    if (needs_grad(a)) attach(out, "MulBackward0", {a}, [b](const Tensor& dout) -> Grads { return {mul(dout, b)}; });
    return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
    Tensor out = elementwise("div", a, b, true_div_type(result_type(a, b)), [](auto x, auto y) { return x / y; });
    // forward: out = a / b, so da = dout / b and db = -dout * a / b^2.
    if (needs_grad(a, b)) {
        bool need_b = b.requires_grad();
        attach(out, "DivBackward0", {a, b},
               [sa = a.shape(), sb = b.shape(), a_saved = SavedTensor(need_b ? a : Tensor()),
                b_saved = SavedTensor(b)](const Tensor& dout) -> Grads {
                   const Tensor& bv = b_saved.get();
                   Tensor da = sum_to(div(dout, bv), sa);
                   Tensor db;
                   if (a_saved.get().defined()) db = sum_to(neg(div(mul(dout, a_saved.get()), mul(bv, bv))), sb);
                   return {da, db};
               });
    }
    return out;
}

Tensor div(const Tensor& a, Scalar b) {
    Tensor out =
        with_scalar("div", a, b, true_div_type(b.result_type(a.dtype())), [](auto x, auto y) { return x / y; });
    // forward: out = a / b, so da = dout / b.
    if (needs_grad(a)) attach(out, "DivBackward0", {a}, [b](const Tensor& dout) -> Grads { return {div(dout, b)}; });
    return out;
}

Tensor div(Scalar a, const Tensor& b) {
    // PyTorch's Tensor.__rtruediv__ is `self.reciprocal() * other`: two
    // roundings instead of one, and the nodes MulBackward0 and
    // ReciprocalBackward0, which ember records too.
    return mul(reciprocal(b), a);
}

// ---- pow ------------------------------------------------------------------------------------

namespace {

// x^p for an integer exponent >= 0 by repeated squaring (wrapping on overflow).
int64_t int_pow(int64_t x, int64_t p) {
    int64_t result = 1;
    while (p > 0) {
        if (p & 1) result = mul_op(result, x);
        x = mul_op(x, x);
        p >>= 1;
    }
    return result;
}

// PyTorch computes a few exponents without std::pow; doing the same keeps
// results identical to the last bit.
template <typename T>
T pow_value(T x, T p) {
    if (p == T(2)) return x * x;
    if (p == T(3)) return x * x * x;
    if (p == T(0.5)) return std::sqrt(x);
    if (p == T(-0.5)) return T(1) / std::sqrt(x);
    if (p == T(-1)) return T(1) / x;
    if (p == T(-2)) return T(1) / (x * x);
    return std::pow(x, p);
}

} // namespace

Tensor pow(const Tensor& x, Scalar exponent) {
    DType dtype = exponent.result_type(x.dtype());
    if (dtype == kBool) dtype = kInt64;
    if (dtype == kInt64 && exponent.to<int64_t>() < 0)
        fail<ValueError>("pow", "integers to negative integer powers are not allowed (tensor of shape ", x.shape(),
                         ", exponent ", exponent.to_double(), ")");
    Tensor out = empty_for("pow", x.shape(), dtype);
    Tensor cx = converted(x, dtype);
    dispatch_numeric(dtype, "pow", [&]<typename T>(TypeTag<T>) {
        if constexpr (std::is_integral_v<T>) {
            int64_t p = exponent.to<int64_t>();
            map_unary<T, T>(out, cx, [p](T v) { return int_pow(v, p); });
        } else {
            T p = exponent.to<T>();
            map_unary<T, T>(out, cx, [p](T v) { return pow_value(v, p); });
        }
    });
    // forward: out = x^p, so dx = dout * p * x^(p-1) (and 0 when p = 0).
    if (needs_grad(x)) {
        double p = exponent.to_double();
        attach(out, "PowBackward0", {x}, [p, x_saved = SavedTensor(x)](const Tensor& dout) -> Grads {
            if (p == 0.0) return {zeros_like(dout)};
            return {mul(dout, mul(pow(x_saved.get(), p - 1.0), p))};
        });
    }
    return out;
}

Tensor pow(Scalar base, const Tensor& exponent) {
    DType dtype = base.result_type(exponent.dtype());
    if (dtype == kBool) dtype = kInt64;
    Tensor out = empty(exponent.shape(), dtype);
    Tensor ce = converted(exponent, dtype);
    dispatch_numeric(dtype, "pow", [&]<typename T>(TypeTag<T>) {
        if constexpr (std::is_integral_v<T>) {
            // An integer to a negative power truncates towards 0, as PyTorch's
            // integer pow does: 1 stays 1, -1 alternates, anything else is 0.
            int64_t b = base.to<int64_t>();
            map_unary<T, T>(out, ce, [b](T p) {
                if (p >= 0) return int_pow(b, p);
                return b == 1 ? T(1) : b == -1 ? T(p % 2 != 0 ? -1 : 1) : T(0);
            });
        } else {
            T b = base.to<T>();
            map_unary<T, T>(out, ce, [b](T p) { return std::pow(b, p); });
        }
    });
    // forward: out = b^e, so de = dout * b^e ln b = dout * (out * ln b). For
    // b = 0, ln b = -inf: PyTorch gives 0 where e >= 0 (0^e is flat there
    // from the right), and so does ember.
    if (needs_grad(exponent)) {
        double b = base.to_double();
        attach(out, "PowBackward2", {exponent},
               [b, y = SavedTensor(out), e = SavedTensor(b == 0 ? exponent : Tensor())](const Tensor& dout) -> Grads {
                   Tensor slope = mul(y.get(), std::log(b)); // out * ln b
                   if (b == 0) slope = masked_fill(slope, ge(e.get(), 0), 0);
                   return {mul(dout, slope)};
               });
    }
    return out;
}

// ---- outer --------------------------------------------------------------------------------------

Tensor outer(const Tensor& a, const Tensor& b) {
    if (a.dim() != 1 || b.dim() != 1)
        fail<ShapeError>("outer", "expects two 1-D tensors, got a ", a.shape(), " and b ", b.shape());
    // out[i, j] = a[i] * b[j]: a as a column (N,1) times b (M), broadcast to
    // (N,M). PyTorch writes it the same way, so its node is mul's.
    return mul(a.reshape({a.size(0), 1}), b);
}

// ---- operators ---------------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }

} // namespace ember
