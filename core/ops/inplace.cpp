// The in-place arithmetic methods, as PyTorch's set: add_, sub_, mul_ and
// div_, each with a tensor (broadcast to self's shape) and with a number.
// Each checks that it may write into self (its shape, its dtype, no two
// indices on one element; autograd's rules in core/autograd/inplace.cpp),
// writes, bumps the version, and gives self a new history whose backward is
// the out-of-place op's. Tests: tests/test_binary.cpp ("in-place ...").
#include "core/autograd/autograd.h"
#include "core/loops/arithmetic.h"
#include "core/loops/map.h"
#include "core/ops/binary.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::add_op;
using internal::bump_version;
using internal::check_not_bool_sub;
using internal::check_writable;
using internal::contiguous_data;
using internal::converted;
using internal::map_binary;
using internal::mul_op;
using internal::sub_op;
using internal::true_div_type;
using internal::unaliased;

namespace {

// self = f(self, other) with other broadcast to self's shape and computed in
// self's dtype. Checks that the op can write into self: its shape must be the
// broadcast shape, a float result cannot go into an integer tensor, and self
// must not have two indices on one element (an expanded tensor).
template <typename F>
void write_in_place(const char* op, const Tensor& self, const Tensor& other, F f) {
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

// self = f(self, number) for add_ and sub_ with a number. forward: self =
// self +- other, so dself = dout: the history is unchanged but for one more
// node that passes dout through.
template <typename F>
Tensor& shift_by(const char* op, const char* node, Tensor& self, Scalar other, F f) {
    check_inplace(self, op, needs_grad(self));
    write_in_place(op, self, scalar_tensor(other, other.result_type(self.dtype())), f);
    if (needs_grad(self)) attach_inplace(self, node, {self}, [](const Tensor& dout) -> Grads { return {dout}; });
    return self;
}

} // namespace

Tensor& Tensor::add_(const Tensor& other) {
    bool grad = needs_grad(*this, other);
    check_inplace(*this, "add_", grad);
    write_in_place("add_", *this, other, [](auto x, auto y) { return add_op(x, y); });
    // forward: self = self + other, so dself = dout and dother = dout summed to its shape.
    if (grad)
        attach_inplace(*this, "AddBackward0", {*this, other}, [so = other.shape()](const Tensor& dout) -> Grads {
            return {dout, sum_to(dout, so)};
        });
    return *this;
}

Tensor& Tensor::add_(Scalar other) {
    return shift_by("add_", "AddBackward0", *this, other, [](auto x, auto y) { return add_op(x, y); });
}

Tensor& Tensor::sub_(const Tensor& other) {
    check_not_bool_sub("sub_", dtype());
    bool grad = needs_grad(*this, other);
    check_inplace(*this, "sub_", grad);
    write_in_place("sub_", *this, other, [](auto x, auto y) { return sub_op(x, y); });
    // forward: self = self - other, so dself = dout and dother = -dout summed to its shape.
    if (grad)
        attach_inplace(*this, "SubBackward0", {*this, other}, [so = other.shape()](const Tensor& dout) -> Grads {
            return {dout, ember::neg(sum_to(dout, so))};
        });
    return *this;
}

Tensor& Tensor::sub_(Scalar other) {
    check_not_bool_sub("sub_", dtype());
    return shift_by("sub_", "SubBackward0", *this, other, [](auto x, auto y) { return sub_op(x, y); });
}

Tensor& Tensor::mul_(const Tensor& other) {
    bool grad = needs_grad(*this, other);
    check_inplace(*this, "mul_", grad);
    // Backward needs self's and other's values from before the write: save
    // them first, copying whatever the write will overwrite.
    SavedTensor old_self(grad && other.requires_grad() ? contiguous_data(detach()).clone() : Tensor());
    SavedTensor other_saved(grad ? unaliased(other, *this) : Tensor());
    write_in_place("mul_", *this, other, [](auto x, auto y) { return mul_op(x, y); });
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
    write_in_place("mul_", *this, scalar_tensor(other, other.result_type(dtype())),
                   [](auto x, auto y) { return mul_op(x, y); });
    // forward: self = self * other, so dself = dout * other.
    if (grad)
        attach_inplace(*this, "MulBackward0", {*this},
                       [other](const Tensor& dout) -> Grads { return {mul(dout, other)}; });
    return *this;
}

Tensor& Tensor::div_(const Tensor& other) {
    bool grad = needs_grad(*this, other);
    check_inplace(*this, "div_", grad);
    // Backward needs other's values, and self's from before the write when
    // other needs a gradient: save them first, copying what the write will
    // overwrite. other is read in the true-division dtype, so that an
    // integer self with an integer other is refused, not divided in integers.
    SavedTensor old_self(grad && other.requires_grad() ? contiguous_data(detach()).clone() : Tensor());
    SavedTensor other_saved(grad ? unaliased(other, *this) : Tensor());
    write_in_place("div_", *this, converted(other, true_div_type(result_type(*this, other))),
                   [](auto x, auto y) { return x / y; });
    // forward: self = self / other, so dself = dout / other and
    // dother = -dout * old self / other^2, each summed to its shape.
    if (grad)
        attach_inplace(*this, "DivBackward0", {*this, other},
                       [so = other.shape(), other_saved, old = old_self](const Tensor& dout) -> Grads {
                           const Tensor& o = other_saved.get();
                           Tensor dother;
                           if (old.get().defined())
                               dother = sum_to(ember::neg(div(mul(dout, old.get()), mul(o, o))), so);
                           return {div(dout, o), dother};
                       });
    return *this;
}

Tensor& Tensor::div_(Scalar other) {
    bool grad = needs_grad(*this);
    check_inplace(*this, "div_", grad);
    write_in_place("div_", *this, scalar_tensor(other, true_div_type(other.result_type(dtype()))),
                   [](auto x, auto y) { return x / y; });
    // forward: self = self / other, so dself = dout / other.
    if (grad)
        attach_inplace(*this, "DivBackward0", {*this},
                       [other](const Tensor& dout) -> Grads { return {div(dout, other)}; });
    return *this;
}

} // namespace ember
