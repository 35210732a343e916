// The dtype rules add, sub, mul and div share with their in-place forms
// (binary.cpp, inplace.cpp). Private. Tests: tests/test_binary.cpp.
#pragma once

#include "core/tensor/error.h"
#include "core/tensor/tensor.h"

namespace ember::internal {

// The dtype true division computes in: floats keep theirs, integers and
// bools divide in float32 (int64 / int64 is float32), as PyTorch.
inline DType true_div_type(DType dtype) { return is_floating(dtype) ? dtype : kFloat32; }

// On bool, add is "or" and mul is "and" (add_op and mul_op on bool do that);
// PyTorch refuses subtraction, and so does ember.
inline void check_not_bool_sub(const char* op, DType dtype) {
    if (dtype == kBool)
        fail<DTypeError>(op, "subtraction of bool tensors is not supported; use ne(a, b) for exclusive or");
}

} // namespace ember::internal
