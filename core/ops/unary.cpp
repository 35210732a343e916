// Elementwise functions of one tensor: neg, exp, log, sqrt, reciprocal, tanh,
// sigmoid, relu, gelu, abs, sin, cos.
//
// Transcendental functions compute in the input's floating dtype (an integer
// input gives float32, as in PyTorch). Each backward is one fused elementwise
// pass over dout and the saved value, written as PyTorch writes it so that
// gradients round the same way. Tests: tests/test_unary.cpp.
#include <cmath>
#include <numbers>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/loops/arithmetic.h"
#include "core/loops/exponential.h"
#include "core/loops/map.h"
#include "core/ops/gelu.h"
#include "core/ops/ops.h"

namespace ember {

using internal::converted;
using internal::empty_for;
using internal::exponential;
using internal::gelu_erf;
using internal::gelu_erf_grad;
using internal::gelu_tanh;
using internal::gelu_tanh_grad;
using internal::map_binary;
using internal::map_unary;
using internal::sub_op;

namespace {

// out = f(x) in x's floating dtype (float32 for integer x).
template <typename F>
Tensor float_unary(const char* op, const Tensor& x, F f) {
    DType dtype = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
    Tensor out = empty_for(op, x.shape(), dtype);
    Tensor cx = converted(x, dtype);
    dispatch_floating(dtype, op, [&]<typename T>(TypeTag<T>) { map_unary<T, T>(out, cx, [f](T v) { return f(v); }); });
    return out;
}

// out = f(x) in x's own dtype (so neg, abs, relu keep integers integral).
template <typename F>
Tensor numeric_unary(const char* op, const Tensor& x, F f) {
    Tensor out = empty_for(op, x.shape(), x.dtype());
    dispatch_numeric(x.dtype(), op,
                     [&]<typename T>(TypeTag<T>) { map_unary<T, T>(out, x, [f](T v) { return f(v); }); });
    return out;
}

// The gradient pass of a unary op: dx[i] = f(dout[i], saved[i]), one fused
// loop instead of a chain of temporaries.
template <typename F>
Tensor grad_map(const Tensor& dout, const Tensor& saved, F f) {
    Tensor dx = empty_for("backward", saved.shape(), saved.dtype());
    Tensor g = converted(dout, saved.dtype());
    dispatch_floating(saved.dtype(), "backward", [&]<typename T>(TypeTag<T>) {
        map_binary<T, T>(dx, g, saved, [f](T gv, T s) { return f(gv, s); });
    });
    return dx;
}

} // namespace

Tensor neg(const Tensor& x) {
    Tensor out = numeric_unary("neg", x, [](auto v) {
        if constexpr (std::is_floating_point_v<decltype(v)>) return -v; // -(0.0) is -0.0
        else return sub_op(decltype(v)(0), v);                          // wraps at INT64_MIN
    });
    // forward: out = -x, so dx = -dout.
    if (needs_grad(x)) attach(out, "NegBackward0", {x}, [](const Tensor& dout) -> Grads { return {neg(dout)}; });
    return out;
}

Tensor exp(const Tensor& x) {
    Tensor out = float_unary("exp", x, [](auto v) { return exponential(v); });
    // forward: out = e^x, so dx = dout * e^x = dout * out.
    if (needs_grad(x))
        attach(out, "ExpBackward0", {x}, [y = SavedTensor(out)](const Tensor& dout) -> Grads {
            return {grad_map(dout, y.get(), [](auto g, auto yv) { return g * yv; })};
        });
    return out;
}

Tensor log(const Tensor& x) {
    Tensor out = float_unary("log", x, [](auto v) { return std::log(v); });
    // forward: out = ln x, so dx = dout / x.
    if (needs_grad(x))
        attach(out, "LogBackward0", {x}, [xs = SavedTensor(x)](const Tensor& dout) -> Grads {
            return {grad_map(dout, xs.get(), [](auto g, auto xv) { return g / xv; })};
        });
    return out;
}

Tensor sqrt(const Tensor& x) {
    Tensor out = float_unary("sqrt", x, [](auto v) { return std::sqrt(v); });
    // forward: out = x^(1/2), so dx = dout / (2 sqrt(x)) = dout / (2 out).
    if (needs_grad(x))
        attach(out, "SqrtBackward0", {x}, [y = SavedTensor(out)](const Tensor& dout) -> Grads {
            return {grad_map(dout, y.get(), [](auto g, auto yv) { return g / (2 * yv); })};
        });
    return out;
}

Tensor reciprocal(const Tensor& x) {
    Tensor out = float_unary("reciprocal", x, [](auto v) { return decltype(v)(1) / v; });
    // forward: out = 1 / x, so dx = -dout / x^2 = -dout * out^2 (PyTorch's order:
    // -dout times out*out).
    if (needs_grad(x))
        attach(out, "ReciprocalBackward0", {x}, [y = SavedTensor(out)](const Tensor& dout) -> Grads {
            return {grad_map(dout, y.get(), [](auto g, auto yv) { return -g * (yv * yv); })};
        });
    return out;
}

Tensor tanh(const Tensor& x) {
    Tensor out = float_unary("tanh", x, [](auto v) { return std::tanh(v); });
    // forward: out = tanh x, so dx = dout * (1 - tanh^2 x) = dout * (1 - out^2).
    if (needs_grad(x))
        attach(out, "TanhBackward0", {x}, [y = SavedTensor(out)](const Tensor& dout) -> Grads {
            return {grad_map(dout, y.get(), [](auto g, auto yv) { return g * (1 - yv * yv); })};
        });
    return out;
}

Tensor sigmoid(const Tensor& x) {
    Tensor out = float_unary("sigmoid", x, [](auto v) { return 1 / (1 + exponential(-v)); });
    // forward: out = 1 / (1 + e^-x), so dx = dout * out * (1 - out).
    if (needs_grad(x))
        attach(out, "SigmoidBackward0", {x}, [y = SavedTensor(out)](const Tensor& dout) -> Grads {
            return {grad_map(dout, y.get(), [](auto g, auto yv) { return g * (1 - yv) * yv; })};
        });
    return out;
}

Tensor relu(const Tensor& x) {
    // As PyTorch: x < 0 ? 0 : x, so NaN stays NaN and -0.0 stays -0.0.
    Tensor out = numeric_unary("relu", x, [](auto v) { return v < 0 ? decltype(v)(0) : v; });
    // forward: out = max(x, 0), so dx = dout where out > 0, else 0.
    if (needs_grad(x))
        attach(out, "ReluBackward0", {x}, [y = SavedTensor(out)](const Tensor& dout) -> Grads {
            return {grad_map(dout, y.get(), [](auto g, auto yv) { return yv <= 0 ? decltype(g)(0) : g; })};
        });
    return out;
}

Tensor abs(const Tensor& x) {
    Tensor out = numeric_unary("abs", x, [](auto v) {
        if constexpr (std::is_floating_point_v<decltype(v)>) return std::abs(v); // |-0.0| = +0.0
        else return v < 0 ? sub_op(decltype(v)(0), v) : v;                       // wraps at INT64_MIN
    });
    // forward: out = |x|, so dx = dout * sign(x), with sign(0) = 0.
    if (needs_grad(x))
        attach(out, "AbsBackward0", {x}, [xs = SavedTensor(x)](const Tensor& dout) -> Grads {
            return {grad_map(dout, xs.get(), [](auto g, auto xv) {
                using T = decltype(g);
                return g * T((xv > 0) - (xv < 0));
            })};
        });
    return out;
}

// ---- sin, cos (the angles of sinusoidal and rotary position embeddings) --------------------

Tensor sin(const Tensor& x) {
    Tensor out = float_unary("sin", x, [](auto v) { return std::sin(v); });
    // forward: out = sin x, so dx = dout * cos x.
    if (needs_grad(x))
        attach(out, "SinBackward0", {x}, [xs = SavedTensor(x)](const Tensor& dout) -> Grads {
            return {grad_map(dout, xs.get(), [](auto g, auto xv) { return g * std::cos(xv); })};
        });
    return out;
}

Tensor cos(const Tensor& x) {
    Tensor out = float_unary("cos", x, [](auto v) { return std::cos(v); });
    // forward: out = cos x, so dx = dout * -sin x.
    if (needs_grad(x))
        attach(out, "CosBackward0", {x}, [xs = SavedTensor(x)](const Tensor& dout) -> Grads {
            return {grad_map(dout, xs.get(), [](auto g, auto xv) { return g * -std::sin(xv); })};
        });
    return out;
}

// ---- gelu -------------------------------------------------------------------------------------
// Its two forms and their derivatives are in core/ops/gelu.h, shared with
// the fast copy of the exact form (core/kernels/gelu.cpp).

Tensor gelu(const Tensor& x, const std::string& approximate) {
    bool tanh_form = approximate == "tanh";
    if (!tanh_form && approximate != "none")
        fail<ValueError>("gelu", "approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
    // forward: out = gelu(x), so dx = dout * gelu'(x) (derivatives in
    // core/ops/gelu.h). The slope gelu'(x) is computed here, in the forward,
    // and saved in x's place: the exact form's erf is the costly part of
    // both, and the fast loop below computes it once for the two.
    const bool grad = needs_grad(x);
    Tensor out, slope;
    // The exact form on contiguous float32 runs core/ops/gelu.h's loops
    // compiled for AVX2 and AVX-512 (core/kernels/gelu.cpp): the same bits.
    bool fast_erf = false;
    if constexpr (internal::kFastKernelsBuilt)
        fast_erf = !tanh_form && internal::use_fast_kernels() && x.dtype() == kFloat32 && x.is_contiguous();
    if (fast_erf) {
        out = empty_for("gelu", x.shape(), kFloat32);
        if constexpr (internal::kFastKernelsBuilt) {
            if (grad) {
                slope = empty_for("gelu", x.shape(), kFloat32);
                internal::fast::gelu_erf_with_slope(x.data_ptr<float>(), out.data_ptr<float>(), slope.data_ptr<float>(),
                                                    x.numel());
            } else {
                internal::fast::gelu_erf(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
            }
        }
    } else {
        out = tanh_form ? float_unary("gelu", x, [](auto v) { return gelu_tanh(v); })
                        : float_unary("gelu", x, [](auto v) { return gelu_erf(v); });
        if (grad)
            slope = tanh_form ? float_unary("gelu", x, [](auto v) { return gelu_tanh_grad(v); })
                              : float_unary("gelu", x, [](auto v) { return gelu_erf_grad(v); });
    }
    if (grad)
        attach(out, "GeluBackward0", {x}, [slope = SavedTensor(slope)](const Tensor& dout) -> Grads {
            return {grad_map(dout, slope.get(), [](auto g, auto s) { return g * s; })};
        });
    return out;
}

} // namespace ember
