// from_vector and tensor({...}): tensors from C++ values, as torch.tensor([...]).
//
//   tensor({{1.f, 2.f}, {3.f, 4.f}})   // float32 (2,2)
//   tensor({1, 2, 3})                   // int64 (3)
//   tensor({true, false})               // bool (2)
// Up to 4 levels of braces. Integer literals give int64, floating ones float32
// (PyTorch's default dtype), bool ones bool; a dtype in options overrides.
// Rows must have equal lengths. Tests: tests/test_factory.cpp.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/tensor/error.h"
#include "core/tensor/tensor.h"

namespace ember {

// A tensor holding a copy of `values`, viewed as `shape` (default: 1-D), with
// the dtype inferred as for tensor() unless options give one (factory.cpp).
Tensor from_vector(const std::vector<float>& values, const Shape& shape = {}, TensorOptions options = {});
Tensor from_vector(const std::vector<double>& values, const Shape& shape = {}, TensorOptions options = {});
Tensor from_vector(const std::vector<int>& values, const Shape& shape = {}, TensorOptions options = {});
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape = {}, TensorOptions options = {});
Tensor from_vector(const std::vector<bool>& values, const Shape& shape = {}, TensorOptions options = {});

namespace internal {

// Records the length of a brace list at `depth` in `shape`, or checks it
// against the length already recorded there by an earlier row.
inline void record_length(size_t length, Shape& shape, size_t depth) {
    if (shape.size() <= depth) {
        shape.push_back(static_cast<int64_t>(length));
    } else if (shape[depth] != static_cast<int64_t>(length)) {
        fail<ShapeError>("tensor", "nested lists are ragged: expected ", shape[depth], " entries at depth ", depth,
                         ", got ", length);
    }
}

template <typename T>
void flatten_into(std::initializer_list<T> values, std::vector<T>& flat, Shape& shape, size_t depth) {
    record_length(values.size(), shape, depth);
    flat.insert(flat.end(), values.begin(), values.end());
}

template <typename T, typename Row>
void flatten_into(std::initializer_list<Row> rows, std::vector<T>& flat, Shape& shape, size_t depth) {
    record_length(rows.size(), shape, depth);
    for (const Row& row : rows) flatten_into<T>(row, flat, shape, depth + 1);
}

template <typename T, typename Nested>
Tensor from_nested(Nested values, TensorOptions options) {
    std::vector<T> flat;
    Shape shape;
    flatten_into<T>(values, flat, shape, 0);
    return from_vector(flat, shape, options);
}

} // namespace internal

template <typename T>
Tensor tensor(std::initializer_list<T> values, TensorOptions options = {}) {
    return internal::from_nested<T>(values, options);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> values, TensorOptions options = {}) {
    return internal::from_nested<T>(values, options);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values,
              TensorOptions options = {}) {
    return internal::from_nested<T>(values, options);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> values,
              TensorOptions options = {}) {
    return internal::from_nested<T>(values, options);
}

} // namespace ember
