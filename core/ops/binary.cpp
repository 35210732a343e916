// Arithmetic: add, sub, mul, div, pow, outer; tensor with tensor (broadcast)
// and with scalars; the in-place forms; the operators.
//
// Result dtypes follow PyTorch: tensor-tensor ops promote (int64 + float32 is
// float32), a floating scalar lifts an integer tensor to float32, and div is
// true division (int64 / int64 is float32). A broadcast input's gradient is
// dout summed over the dims it was broadcast along (sum_to). Integer
// overflow wraps. Node names are the ones Python's torch prints (a scalar
// operand gives the same MulBackward0 as a tensor one). Tests:
// tests/test_binary.cpp.
#include <cmath>

#include "core/autograd/autograd.h"
#include "core/loops/arithmetic.h"
#include "core/loops/map.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

namespace ember {

using namespace internal;

namespace {

// out = f(a, b) over the broadcast shape, computed in `dtype`.
template <typename F>
Tensor binary_kernel(const char* op, const Tensor& a, const Tensor& b, DType dtype, F f) {
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
Tensor scalar_kernel(const char* op, const Tensor& a, Scalar s, DType dtype, F f) {
    Tensor out = empty_for(op, a.shape(), dtype);
    Tensor ca = converted(a, dtype);
    dispatch(dtype, [&]<typename T>(TypeTag<T>) {
        T v = s.to<T>();
        map_unary<T, T>(out, ca, [f, v](T x) { return f(x, v); });
    });
    return out;
}

DType true_div_type(DType dtype) { return is_floating(dtype) ? dtype : kFloat32; }

// On bool, add is "or" and mul is "and" (add_op and mul_op on bool do that);
// PyTorch refuses subtraction, and so does ember.
void check_not_bool_sub(const char* op, DType dtype) {
    if (dtype == kBool)
        fail<DTypeError>(op, "subtraction of bool tensors is not supported; use ne(a, b) for exclusive or");
}

} // namespace

// ---- add, sub ----------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b) {
    Tensor out = binary_kernel("add", a, b, result_type(a, b), [](auto x, auto y) { return add_op(x, y); });
    // forward: out = a + b, so da = dout and db = dout (each summed to its shape).
    if (needs_grad(a, b))
        attach(out, "AddBackward0", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& dout) -> Grads {
            return {sum_to(dout, sa), sum_to(dout, sb)};
        });
    return out;
}

Tensor add(const Tensor& a, Scalar b) {
    Tensor out = scalar_kernel("add", a, b, b.result_type(a.dtype()), [](auto x, auto y) { return add_op(x, y); });
    // forward: out = a + b, so da = dout.
    if (needs_grad(a)) attach(out, "AddBackward0", {a}, [](const Tensor& dout) -> Grads { return {dout}; });
    return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
    check_not_bool_sub("sub", result_type(a, b));
    Tensor out = binary_kernel("sub", a, b, result_type(a, b), [](auto x, auto y) { return sub_op(x, y); });
    // forward: out = a - b, so da = dout and db = -dout.
    if (needs_grad(a, b))
        attach(out, "SubBackward0", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& dout) -> Grads {
            return {sum_to(dout, sa), neg(sum_to(dout, sb))};
        });
    return out;
}

Tensor sub(const Tensor& a, Scalar b) {
    check_not_bool_sub("sub", b.result_type(a.dtype()));
    Tensor out = scalar_kernel("sub", a, b, b.result_type(a.dtype()), [](auto x, auto y) { return sub_op(x, y); });
    // forward: out = a - b, so da = dout.
    if (needs_grad(a)) attach(out, "SubBackward0", {a}, [](const Tensor& dout) -> Grads { return {dout}; });
    return out;
}

Tensor sub(Scalar a, const Tensor& b) {
    check_not_bool_sub("sub", a.result_type(b.dtype()));
    Tensor out = scalar_kernel("sub", b, a, a.result_type(b.dtype()), [](auto x, auto y) { return sub_op(y, x); });
    // forward: out = a - b, so db = -dout.
    if (needs_grad(b)) attach(out, "RsubBackward1", {b}, [](const Tensor& dout) -> Grads { return {neg(dout)}; });
    return out;
}

// ---- mul, div ------------------------------------------------------------------------------

Tensor mul(const Tensor& a, const Tensor& b) {
    Tensor out = binary_kernel("mul", a, b, result_type(a, b), [](auto x, auto y) { return mul_op(x, y); });
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
    Tensor out = scalar_kernel("mul", a, b, b.result_type(a.dtype()), [](auto x, auto y) { return mul_op(x, y); });
    // forward: out = a * b, so da = dout * b.
    if (needs_grad(a)) attach(out, "MulBackward0", {a}, [b](const Tensor& dout) -> Grads { return {mul(dout, b)}; });
    return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
    Tensor out = binary_kernel("div", a, b, true_div_type(result_type(a, b)), [](auto x, auto y) { return x / y; });
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
        scalar_kernel("div", a, b, true_div_type(b.result_type(a.dtype())), [](auto x, auto y) { return x / y; });
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

// ---- in-place forms -----------------------------------------------------------------------------

namespace {

// self = f(self, other) with other broadcast to self's shape and computed in
// self's dtype. Checks that the op can write into self: its shape must be the
// broadcast shape, a float result cannot go into an integer tensor, and self
// must not have two indices on one element (an expanded tensor).
template <typename F>
void inplace_kernel(const char* op, const Tensor& self, const Tensor& other, F f) {
    if (broadcast_shapes(self.shape(), other.shape(), op) != self.shape())
        fail<ShapeError>(op, "the result of shape ", broadcast_shapes(self.shape(), other.shape(), op),
                         " does not fit in the tensor of shape ", self.shape(), " it would be written to");
    DType dtype = result_type(self, other);
    if (is_floating(dtype) && !self.is_floating_point())
        fail<DTypeError>(op, "a ", dtype_name(dtype), " result cannot be written into a ", dtype_name(self.dtype()),
                         " tensor of shape ", self.shape());
    check_writable(self, op);
    // If other shares memory with self, read a copy: writes to self would
    // otherwise change other's elements before they are read.
    Tensor src = converted(unaliased(other, self), self.dtype());
    dispatch(self.dtype(),
             [&]<typename T>(TypeTag<T>) { map_binary<T, T>(self, self, src, [f](T x, T y) { return f(x, y); }); });
    bump_version(self);
}

} // namespace

Tensor& Tensor::add_(const Tensor& other) {
    bool grad = needs_grad(*this, other);
    check_inplace(*this, "add_", grad);
    inplace_kernel("add_", *this, other, [](auto x, auto y) { return add_op(x, y); });
    // forward: self = self + other, so dself = dout and dother = dout summed to its shape.
    if (grad)
        attach_inplace(*this, "AddBackward0", {*this, other}, [so = other.shape()](const Tensor& dout) -> Grads {
            return {dout, sum_to(dout, so)};
        });
    return *this;
}

Tensor& Tensor::add_(Scalar other) {
    check_inplace(*this, "add_", needs_grad(*this));
    inplace_kernel("add_", *this, scalar_tensor(other, other.result_type(dtype())),
                   [](auto x, auto y) { return add_op(x, y); });
    // forward: self = self + other, so dself = dout: the history is unchanged
    // but for one more node that passes dout through.
    if (needs_grad(*this))
        attach_inplace(*this, "AddBackward0", {*this}, [](const Tensor& dout) -> Grads { return {dout}; });
    return *this;
}

Tensor& Tensor::sub_(const Tensor& other) {
    check_not_bool_sub("sub_", dtype());
    bool grad = needs_grad(*this, other);
    check_inplace(*this, "sub_", grad);
    inplace_kernel("sub_", *this, other, [](auto x, auto y) { return sub_op(x, y); });
    // forward: self = self - other, so dself = dout and dother = -dout summed to its shape.
    if (grad)
        attach_inplace(*this, "SubBackward0", {*this, other}, [so = other.shape()](const Tensor& dout) -> Grads {
            return {dout, ember::neg(sum_to(dout, so))};
        });
    return *this;
}

Tensor& Tensor::mul_(const Tensor& other) {
    bool grad = needs_grad(*this, other);
    check_inplace(*this, "mul_", grad);
    // Backward needs self's and other's values from before the write: save
    // them first, copying whatever the write will overwrite.
    SavedTensor old_self(grad && other.requires_grad() ? contiguous_data(detach()).clone() : Tensor());
    SavedTensor other_saved(grad ? unaliased(other, *this) : Tensor());
    inplace_kernel("mul_", *this, other, [](auto x, auto y) { return mul_op(x, y); });
    // forward: self = self * other, so dself = dout * other and dother = dout * old self.
    if (grad)
        attach_inplace(*this, "MulBackward0", {*this, other},
                       [so = other.shape(), other_saved, old = old_self](const Tensor& dout) -> Grads {
                           Tensor dother = old.get().defined() ? sum_to(mul(dout, old.get()), so) : Tensor();
                           return {mul(dout, other_saved.get()), dother};
                       });
    return *this;
}

Tensor& Tensor::mul_(Scalar other) {
    bool grad = needs_grad(*this);
    check_inplace(*this, "mul_", grad);
    inplace_kernel("mul_", *this, scalar_tensor(other, other.result_type(dtype())),
                   [](auto x, auto y) { return mul_op(x, y); });
    // forward: self = self * other, so dself = dout * other.
    if (grad)
        attach_inplace(*this, "MulBackward0", {*this},
                       [other](const Tensor& dout) -> Grads { return {mul(dout, other)}; });
    return *this;
}

Tensor& Tensor::div_(Scalar other) {
    bool grad = needs_grad(*this);
    check_inplace(*this, "div_", grad);
    inplace_kernel("div_", *this, scalar_tensor(other, true_div_type(other.result_type(dtype()))),
                   [](auto x, auto y) { return x / y; });
    // forward: self = self / other, so dself = dout / other.
    if (grad)
        attach_inplace(*this, "DivBackward0", {*this},
                       [other](const Tensor& dout) -> Grads { return {div(dout, other)}; });
    return *this;
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
