// ember's exceptions, and the helper that builds their messages.
//
// Every public op validates its arguments before doing any work and throws one
// of these types. The message starts with the op's name in brackets and names
// every shape involved, so the first line of a failure says what went wrong:
//   [matmul] inner dimensions differ: a is (4,8), b is (16,32)
// Tests: tests/test_errors.cpp and the error sections of each op's test file.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember {

// A tensor's shape (or strides): one int64 per dimension, outermost first.
using Shape = std::vector<int64_t>;

// Base of every ember exception; catch this to catch them all.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Shapes that do not fit together (broadcasting, matmul, view, cat, ...).
class ShapeError : public Error {
public:
    using Error::Error;
};

// A dtype the op does not support, or two dtypes that must agree.
class DTypeError : public Error {
public:
    using Error::Error;
};

// A dimension or an index outside its range.
class IndexError : public Error {
public:
    using Error::Error;
};

// Any other bad argument: a negative size, p outside [0, 1], a zero step.
class ValueError : public Error {
public:
    using Error::Error;
};

// Memory the machine cannot give: a tensor too large for it. The message
// names the op and the bytes asked for:
//   [matmul] out of memory: cannot allocate 2.0 EiB (2305843009213693952 bytes)
// ember never lets std::bad_alloc escape from a tensor allocation.
class OutOfMemoryError : public Error {
public:
    using Error::Error;
};

// Misuse of the autograd graph: backward twice, backward on a tensor that
// needs no grad, a saved tensor modified in place, ...
class AutogradError : public Error {
public:
    using Error::Error;
};

// "(4,8)" for a shape, "()" for a scalar: the notation every message uses.
inline std::string shape_str(const Shape& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) s += ",";
        s += std::to_string(shape[i]);
    }
    return s + ")";
}

// `std::cout << t.sizes()` and `<< t.strides()` print as PyTorch's C++
// frontend prints them, "[4, 8]" (Python's torch.Size([4, 8]) without the
// name); messages keep the compact "(4,8)" of shape_str. (Shape is a
// std::vector, so the operator is found through `using namespace ember;`,
// as the examples and docs write.)
inline std::ostream& operator<<(std::ostream& out, const Shape& shape) {
    out << "[";
    for (size_t i = 0; i < shape.size(); ++i) out << (i > 0 ? ", " : "") << shape[i];
    return out << "]";
}

namespace internal {

inline void append(std::ostringstream& out, const Shape& shape) { out << shape_str(shape); }

template <typename T>
void append(std::ostringstream& out, const T& value) {
    out << value;
}

} // namespace internal

// fail<ShapeError>("matmul", "inner dimensions differ: a is ", a.shape(), ...)
// throws ShapeError("[matmul] inner dimensions differ: a is (4,8), ...").
// Shapes given as arguments print in the (4,8) notation.
template <typename E, typename... Parts>
[[noreturn]] void fail(const std::string& op, const Parts&... parts) {
    std::ostringstream out;
    out << "[" << op << "] ";
    (internal::append(out, parts), ...);
    throw E(out.str());
}

} // namespace ember
