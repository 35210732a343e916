// A faster copy of layer_norm's forward and backward, with the bits of the
// plain loops in core/ops/layer_norm.cpp (what makes it faster: below).
// Private: that file calls it when the fast kernels are on (dispatch.h).
// Tests: tests/test_kernels.cpp.
#pragma once

#include <cstdint>

// Rows go in blocks of 16, the statistics of every row of a block first and
// then its outputs. A row's statistics are a chain of dependent steps (a sum,
// a division, a second sum, a square root, a division); with short rows
// (C = 32 at the tiny size) that chain, not the arithmetic, set the pace when
// each row ran start to finish. Kept apart, the chains of neighbouring rows
// overlap in the CPU. The weight and bias gradients, sums over rows, are
// split between threads by columns and compiled for AVX2 too (vectorize.h).

namespace ember::internal {

// y, mean and rstd of `rows` contiguous rows of n; w and b (n values) may be null.
void layer_norm_forward_rows(const float* x, const float* w, const float* b, double eps, int64_t rows, int64_t n,
                             float* y, double* mean, double* rstd);
void layer_norm_forward_rows(const double* x, const double* w, const double* b, double eps, int64_t rows, int64_t n,
                             double* y, double* mean, double* rstd);

// dx (may be null), dw and db (either may be null) from dout, the saved x,
// mean and rstd; w is the weight (n values, all 1 when the op had none).
void layer_norm_backward_rows(const float* dout, const float* x, const float* w, const double* mean, const double* rstd,
                              int64_t rows, int64_t n, float* dx, float* dw, float* db);
void layer_norm_backward_rows(const double* dout, const double* x, const double* w, const double* mean,
                              const double* rstd, int64_t rows, int64_t n, double* dx, double* dw, double* db);

} // namespace ember::internal
