// Element-wise loops over tensors: map_unary, map_binary and map_ternary
// run a scalar function over every element of their output, reading inputs
// broadcast to the output's shape (stride 0 where an input is broadcast).
// Runs along which every operand is contiguous take a plain indexed loop
// the compiler can vectorise; large outputs are split between threads
// (parallel.h). The scalar functions' own rules (integer wraparound) are in
// arithmetic.h. Private; used by core/ops/binary.cpp, compare.cpp and
// unary.cpp, and tested through them (tests/test_binary.cpp).
#pragma once

#include <cstdint>

#include "core/loops/iter.h"
#include "core/tensor/internal.h"

namespace ember::internal {

// Element (0, 0, ...) of t as a T*; T must be t's C++ type (unchecked:
// data_ptr<T>() checks, these loops have already dispatched on the dtype).
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
        } else if (step[0] == 1 && step[1] == 1 && step[2] == 0) { // b one number (x * 0.5, g.mul_(c))
            const T y0 = *y;
            for (int64_t i = 0; i < n; ++i) po[i] = f(x[i], y0);
        } else if (step[0] == 1 && step[1] == 0 && step[2] == 1) { // a one number (1 - x)
            const T x0 = *x;
            for (int64_t i = 0; i < n; ++i) po[i] = f(x0, y[i]);
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
