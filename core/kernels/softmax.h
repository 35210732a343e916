// Faster copies of softmax's contiguous rows and of scaled_masked_softmax,
// with the bits of the plain loops in core/ops/softmax.cpp (what makes them
// faster: below). Private: that file calls them when the fast kernels are
// on (dispatch.h). Tests: tests/test_kernels.cpp.
#pragma once

#include <cstdint>

#include "core/tensor/tensor.h"

// Short rows (attention's, T = 8 at the tiny size) are exponentiated several
// rows at a time through one buffer, so the vectorised loop runs long enough
// to pay for itself; rows are scaled and masked in blocks that stay in L1;
// the mask's rows are found by stepping through the period of its broadcast
// pattern instead of dividing per row; and the loops have AVX2 copies picked
// at run time (vectorize.h).

namespace ember::internal {

// softmax over `rows` contiguous rows of n > 0 (out may be x), rows split
// between threads.
void softmax_last_dim(const float* x, float* out, int64_t rows, int64_t n);
void softmax_last_dim(const double* x, double* out, int64_t rows, int64_t n);

// scaled_masked_softmax's forward over `rows` contiguous rows of n > 0:
// y = softmax(x * s (or x / s when divide), -inf where mask), where mask is
// the bool mask expanded to x's shape (a view), or undefined.
void scaled_masked_softmax_rows(const float* x, float* y, int64_t rows, int64_t n, const Tensor& mask, float s,
                                bool divide);
void scaled_masked_softmax_rows(const double* x, double* y, int64_t rows, int64_t n, const Tensor& mask, double s,
                                bool divide);

// Its backward: dx from the saved output y and dy.
void scaled_masked_softmax_backward_rows(const float* y, const float* dy, float* dx, int64_t rows, int64_t n,
                                         const Tensor& mask, float s, bool divide);
void scaled_masked_softmax_backward_rows(const double* y, const double* dy, double* dx, int64_t rows, int64_t n,
                                         const Tensor& mask, double s, bool divide);

} // namespace ember::internal
