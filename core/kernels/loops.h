// Elementwise loops over tensors, and the scalar arithmetic they apply.
//
// map_unary / map_binary / map_ternary run a scalar function over every
// element of their output, reading inputs broadcast to the output's shape
// (stride 0 where an input is broadcast). Runs along which every operand is
// contiguous take a plain indexed loop the compiler can vectorise. Integer
// arithmetic wraps around on overflow (as PyTorch's does in practice) instead
// of being undefined behaviour. Private; used by core/ops/binary.cpp,
// compare.cpp and unary.cpp, and tested through them (tests/test_binary.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/kernels/iter.h"
#include "core/tensor/internal.h"

namespace ember::internal {

// ---- scalar arithmetic without undefined behaviour ----------------------------------

template <typename T>
T add_op(T x, T y) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
    else return x + y;
}
template <typename T>
T sub_op(T x, T y) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
    else return x - y;
}
template <typename T>
T mul_op(T x, T y) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
    else return x * y;
}

// A value converted to D. Float to integer conversions that C++ leaves
// undefined (NaN, out of range) give the integer minimum, as x86's
// conversion instruction (and so PyTorch) does.
template <typename D, typename S>
D cast_value(S v) {
    if constexpr (std::is_same_v<D, bool>) {
        return v != S(0);
    } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
        constexpr double limit = 9223372036854775808.0; // 2^63
        double d = static_cast<double>(v);
        if (!(d >= -limit && d < limit)) return std::numeric_limits<D>::min();
        return static_cast<D>(v);
    } else {
        return static_cast<D>(v);
    }
}

// ---- loops ------------------------------------------------------------------------------

template <typename T>
T* data_of(const Tensor& t) {
    return static_cast<T*>(t.storage()->data()) + t.storage_offset();
}

// out[i] = f(x[i]); x has type T and broadcasts to out's shape.
template <typename R, typename T, typename F>
void map_unary(const Tensor& out, const Tensor& x, F f) {
    Shape sx = broadcast_strides(x, out.shape());
    StridedLayout<2> layout(out.shape(), {&out.strides(), &sx});
    R* o = data_of<R>(out);
    const T* a = data_of<T>(x);
    parallel_for_each_run(layout, out.numel(), [&](const auto& off, const auto& step, int64_t n) {
        R* po = o + off[0];
        const T* pa = a + off[1];
        if (step[0] == 1 && step[1] == 1) {
            for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i]);
        } else {
            for (int64_t i = 0; i < n; ++i) po[i * step[0]] = f(pa[i * step[1]]);
        }
    });
}

// out[i] = f(a[i], b[i]); a and b have type T and broadcast to out's shape.
template <typename R, typename T, typename F>
void map_binary(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
    Shape sa = broadcast_strides(a, out.shape());
    Shape sb = broadcast_strides(b, out.shape());
    StridedLayout<3> layout(out.shape(), {&out.strides(), &sa, &sb});
    R* o = data_of<R>(out);
    const T* pa = data_of<T>(a);
    const T* pb = data_of<T>(b);
    parallel_for_each_run(layout, out.numel(), [&](const auto& off, const auto& step, int64_t n) {
        R* po = o + off[0];
        const T* x = pa + off[1];
        const T* y = pb + off[2];
        if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
            for (int64_t i = 0; i < n; ++i) po[i] = f(x[i], y[i]);
        } else {
            for (int64_t i = 0; i < n; ++i) po[i * step[0]] = f(x[i * step[1]], y[i * step[2]]);
        }
    });
}

// out[i] = f(c[i], a[i], b[i]); c has type C, a and b type T, all broadcast.
template <typename R, typename C, typename T, typename F>
void map_ternary(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b, F f) {
    Shape sc = broadcast_strides(c, out.shape());
    Shape sa = broadcast_strides(a, out.shape());
    Shape sb = broadcast_strides(b, out.shape());
    StridedLayout<4> layout(out.shape(), {&out.strides(), &sc, &sa, &sb});
    R* o = data_of<R>(out);
    const C* pc = data_of<C>(c);
    const T* pa = data_of<T>(a);
    const T* pb = data_of<T>(b);
    parallel_for_each_run(layout, out.numel(), [&](const auto& off, const auto& step, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
            o[off[0] + i * step[0]] = f(pc[off[1] + i * step[1]], pa[off[2] + i * step[2]], pb[off[3] + i * step[3]]);
    });
}

} // namespace ember::internal
