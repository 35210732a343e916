// The element-wise steps of fused attention (core/ops/attention.cpp) over a
// block of scores, one row per query. Plain loops, written so that a vector
// loop can follow their order exactly (running sums and maxima in 16 lanes),
// and compiled for baseline x86-64, AVX2 and AVX-512 (vectorize.h): the
// same bits on every CPU. Private. Tests: tests/test_sdpa.cpp.
#pragma once

#include <cstdint>

namespace ember::internal {

// One step of the online softmax over a block s (rows x cols, row stride
// ld) of scaled, masked scores, with each row's running max m, running sum
// l and output so far o (rows x Ev, contiguous):
//   m' = max(m, max_c s_c);  s_c = e^(s_c - m');  a = e^(m - m')
//   l = l a + lane_sum(s);   o *= a;  m = m'
// A row whose scores are all -inf so far (m' = -inf) gets weights 0 and
// keeps its m, l and o.
void online_softmax_block(float* s, int64_t rows, int64_t cols, int64_t ld, float* m, float* l, float* o, int64_t Ev);
void online_softmax_block(double* s, int64_t rows, int64_t cols, int64_t ld, double* m, double* l, double* o,
                          int64_t Ev);

// The sum of x[0, n) in an order a vector loop can follow: 16 running sums
// (x[c] goes into sum c % 16), then those 16 added first to last.
float lane_sum(const float* x, int64_t n);
double lane_sum(const double* x, int64_t n);

// The backward's weights: s_rc = e^(s_rc - lse_r), the softmax recomputed
// from the scores and each row's log-sum-exp.
void softmax_from_lse(float* s, int64_t rows, int64_t cols, int64_t ld, const float* lse);
void softmax_from_lse(double* s, int64_t rows, int64_t cols, int64_t ld, const double* lse);

// The backward's score gradient, in dp's place: dp_rc = p_rc (dp_rc - D_r)
// * scale, except 0 where p_rc = 0 (a masked key) or the row's every key is
// masked (lse_r = -inf): as masked_fill's backward, no gradient there.
void score_gradient(float* dp, const float* p, int64_t rows, int64_t cols, int64_t ld, const float* d, const float* lse,
                    float scale);
void score_gradient(double* dp, const double* p, int64_t rows, int64_t cols, int64_t ld, const double* d,
                    const double* lse, double scale);

// Dropout on one row of weights p[0, cols), cols <= 64: p_c * keep where
// bit c of `bits` is 1, else 0.
void keep_where(float* p, int64_t cols, uint64_t bits, float keep);
void keep_where(double* p, int64_t cols, uint64_t bits, double keep);

} // namespace ember::internal
