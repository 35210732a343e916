// cross_entropy's row loops compiled twice, for baseline x86-64 and for
// AVX2 (vectorize.h), with the bits of the plain loops in
// core/ops/cross_entropy.cpp. Private: that file calls them when the fast
// kernels are on. Tests: tests/test_kernels.cpp.
#pragma once

#include <cstdint>

namespace ember::internal {

// The forward over n rows of c logits: lse[i] = log sum_j e^(x_ij), and the
// sum over rows whose target is not ignore_index of lse[i] - x[i, t_i].
double cross_entropy_forward_rows(const float* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                  double* lse);
double cross_entropy_forward_rows(const double* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                  double* lse);

// The backward: dx_ij = scale * (e^(x_ij - lse_i) - [j == t_i]), 0 on ignored rows.
void cross_entropy_backward_rows(const float* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                 const double* lse, double scale, float* dx);
void cross_entropy_backward_rows(const double* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                 const double* lse, double scale, double* dx);

} // namespace ember::internal
