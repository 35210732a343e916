// Scalar: a number that remembers whether it was written as an integer.
//
// PyTorch keeps `int_tensor * 2` an int64 tensor and makes `int_tensor * 2.5`
// a float32 one. A plain `double` parameter cannot tell 2 from 2.0 (nor hold
// every int64 exactly), so ops that take a number take a Scalar, which any
// C++ arithmetic value converts to. Integers are kept as int64, exactly.
// Tests: tests/test_binary.cpp (type promotion with scalars).
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/tensor/dtype.h"

namespace ember {

namespace internal {
// Any C++ number: the integers (bool included) and the floating types.
template <typename T>
concept Arithmetic = std::is_arithmetic_v<T>;
} // namespace internal

class Scalar {
public:
    template <internal::Arithmetic T>
    Scalar(T value) // NOLINT: implicit on purpose, so `x * 2` works
        : integral_(std::is_integral_v<T>), boolean_(std::is_same_v<T, bool>) {
        if constexpr (std::is_integral_v<T>) {
            // Every C++ integer but an unsigned one above INT64_MAX fits; those saturate.
            if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t))
                integer_ = value > static_cast<T>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(value);
            else integer_ = static_cast<int64_t>(value);
            value_ = static_cast<double>(integer_);
        } else {
            value_ = static_cast<double>(value);
        }
    }

    double to_double() const { return value_; }
    bool is_integral() const { return integral_; }
    bool is_bool() const { return boolean_; }

    // The value as the element type T of a tensor: integers convert exactly
    // from their int64, floating values round once. A float that does not fit
    // an integer T (NaN, out of range) gives T's minimum, as x86 does.
    template <typename T>
    T to() const {
        if constexpr (std::is_same_v<T, bool>) {
            return integral_ ? integer_ != 0 : value_ != 0;
        } else if constexpr (std::is_integral_v<T>) {
            if (integral_) return static_cast<T>(integer_);
            if (!(value_ >= -9223372036854775808.0 && value_ < 9223372036854775808.0))
                return std::numeric_limits<T>::min();
            return static_cast<T>(value_);
        } else {
            return integral_ ? static_cast<T>(integer_) : static_cast<T>(value_);
        }
    }

    // Whether the value converts to `dtype` without overflow: a floating
    // value written into an int64 tensor must be a number within int64's
    // range. fill_ and full refuse the others, as PyTorch does ("value cannot
    // be converted to type int64_t without overflow"); a tensor's to(kInt64)
    // turns them into the minimum, as PyTorch on x86 does.
    bool fits(DType dtype) const {
        if (dtype != DType::Int64 || integral_) return true;
        return value_ >= -9223372036854775808.0 && value_ < 9223372036854775808.0;
    }

    // The dtype of `tensor op scalar`: the tensor's dtype, except that a
    // floating scalar lifts an integer or bool tensor to float32 and an
    // integral scalar lifts a bool tensor to int64 (PyTorch's rule).
    DType result_type(DType tensor_dtype) const {
        if (!integral_ && !is_floating(tensor_dtype)) return DType::Float32;
        if (integral_ && !boolean_ && tensor_dtype == DType::Bool) return DType::Int64;
        return tensor_dtype;
    }

private:
    double value_ = 0;
    int64_t integer_ = 0;
    bool integral_;
    bool boolean_;
};

} // namespace ember
