// Element types and the rules that combine them.
//
// ember has four dtypes, as PyTorch names them: float32 (the default, what
// models compute in), float64 (for gradient checks), int64 (indices, targets,
// randint) and bool (masks from comparisons). promote_types follows PyTorch's
// type promotion for these four. dispatch() turns a runtime dtype into a C++
// type for a kernel written once as a template.
// Tests: tests/test_tensor.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tensor/error.h"

namespace ember {

enum class DType : uint8_t { Bool, Int64, Float32, Float64 };

// PyTorch's C++ spellings, so `zeros({2, 3}, kFloat64)` reads as in libtorch.
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;

inline size_t element_size(DType dtype) {
    switch (dtype) {
    case DType::Bool: return sizeof(bool);
    case DType::Int64: return sizeof(int64_t);
    case DType::Float32: return sizeof(float);
    case DType::Float64: return sizeof(double);
    }
    return 0;
}

// "float32", "int64", ...: the names error messages use.
inline const char* dtype_name(DType dtype) {
    switch (dtype) {
    case DType::Bool: return "bool";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    }
    return "?";
}

inline std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

inline bool is_floating(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

// The dtype of a binary op's result between two tensors: the "higher" of the
// two in bool < int64 < float32 < float64 (PyTorch's rule for these four).
inline DType promote_types(DType a, DType b) { return a > b ? a : b; }

// The C++ type behind each dtype, and back.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<bool>() {
    return DType::Bool;
}
template <>
constexpr DType dtype_of<int64_t>() {
    return DType::Int64;
}
template <>
constexpr DType dtype_of<float>() {
    return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
    return DType::Float64;
}

// A value that stands for a type, so a generic lambda can receive one:
//   dispatch(dtype, [&]<typename T>(TypeTag<T>) { kernel<T>(...); });
template <typename T>
struct TypeTag {
    using type = T;
};

// Calls fn(TypeTag<T>{}) with T the C++ type of `dtype`.
template <typename F>
decltype(auto) dispatch(DType dtype, F&& fn) {
    switch (dtype) {
    case DType::Bool: return fn(TypeTag<bool>{});
    case DType::Int64: return fn(TypeTag<int64_t>{});
    case DType::Float32: return fn(TypeTag<float>{});
    case DType::Float64: break;
    }
    return fn(TypeTag<double>{});
}

// As dispatch, for kernels that only make sense on floating point; any other
// dtype is a DTypeError naming the op.
template <typename F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& fn) {
    if (dtype == DType::Float32) return fn(TypeTag<float>{});
    if (dtype == DType::Float64) return fn(TypeTag<double>{});
    fail<DTypeError>(op, "expected a float32 or float64 tensor, got ", dtype_name(dtype));
}

// As dispatch, for arithmetic (everything but bool).
template <typename F>
decltype(auto) dispatch_numeric(DType dtype, const char* op, F&& fn) {
    if (dtype == DType::Float32) return fn(TypeTag<float>{});
    if (dtype == DType::Float64) return fn(TypeTag<double>{});
    if (dtype == DType::Int64) return fn(TypeTag<int64_t>{});
    fail<DTypeError>(op, "expected a numeric tensor, got ", dtype_name(dtype));
}

} // namespace ember
