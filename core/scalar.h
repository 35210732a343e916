// Scalar: a number that remembers whether it was written as an integer.
//
// PyTorch keeps `int_tensor * 2` an int64 tensor and makes `int_tensor * 2.5`
// a float32 one. A plain `double` parameter cannot tell 2 from 2.0, so ops that
// take a number take a Scalar, which any C++ arithmetic value converts to.
// Tests: tests/test_elementwise.cpp (type promotion with scalars).
#pragma once

#include <concepts>
#include <cstdint>

#include "dtype.h"

namespace ember {

class Scalar {
public:
    template <typename T>
        requires std::is_arithmetic_v<T>
    Scalar(T value) // NOLINT: implicit on purpose, so `x * 2` works
        : value_(static_cast<double>(value)), integral_(std::is_integral_v<T>),
          boolean_(std::is_same_v<T, bool>) {}

    double to_double() const { return value_; }
    bool is_integral() const { return integral_; }
    bool is_bool() const { return boolean_; }

    // The dtype of `tensor op scalar`: the tensor's dtype, except that a
    // floating scalar lifts an integer or bool tensor to float32 and an
    // integral scalar lifts a bool tensor to int64 (PyTorch's rule).
    DType result_type(DType tensor_dtype) const {
        if (!integral_ && !is_floating(tensor_dtype)) return DType::Float32;
        if (integral_ && !boolean_ && tensor_dtype == DType::Bool) return DType::Int64;
        return tensor_dtype;
    }

private:
    double value_;
    bool integral_;
    bool boolean_;
};

} // namespace ember
