// The scalar rules every element-wise op applies, where C++ and PyTorch
// differ: integer arithmetic wraps around on overflow (as PyTorch's does in
// practice) instead of being undefined behaviour, and a float converted to
// an integer it cannot represent gives the integer minimum, as x86's
// conversion instruction (and so PyTorch) does. Private; used by the op
// files through map.h's loops. Tests: tests/test_binary.cpp ("integer
// arithmetic wraps on overflow"), tests/test_tensor.cpp.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace ember::internal {

// x + y, x - y and x * y; for integers in uint64_t, where wrapping is defined.
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
// undefined (NaN, out of range) give the integer minimum.
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

} // namespace ember::internal
