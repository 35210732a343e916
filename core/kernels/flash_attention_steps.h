// Private to flash_attention.cpp: FlashAttention's element-wise steps over
// a block of scores (scale and causal mask, the online softmax, the output's
// division, the weights from lse, the score gradient, dropout's mask), one
// row per query, each compiled for baseline x86-64, AVX2 and AVX-512. The
// products and the loops over blocks are in flash_attention.cpp;
// docs/flash_attention.md derives the steps. Everything here is in an
// unnamed namespace, as flash_attention.cpp's own helpers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/kernels/vectorize.h"
#include "core/loops/exponential.h"

namespace ember::internal {

namespace {

// Rows of queries and of keys per block: a 64 x 64 block of float scores is
// 16 KB, and with the blocks of q, k and v it stays in the core's caches.
constexpr int64_t kBlock = 64;

// Each step goes over a block's rows, one row per query. Their loops are
// written out in lanes (running sums and maxima in 16 lanes) so that a
// vector loop can follow their order exactly, and the marked functions are
// compiled for baseline x86-64, AVX2 and AVX-512 (vectorize.h): the same
// bits on every CPU.

constexpr int64_t kLanes = 16;

// The lane sum of x[0, n), in an order a vector loop can follow, in two
// steps: lane_partials makes 16 running sums (x[c] goes into sum c % 16),
// and lanes_added adds those 16 first to last.
template <typename T>
[[gnu::always_inline]] inline void lane_partials(const T* x, int64_t n, T* lane) {
    for (int64_t q = 0; q < kLanes; ++q) lane[q] = 0;
    int64_t c0 = 0;
    for (; c0 + kLanes <= n; c0 += kLanes)
        for (int64_t q = 0; q < kLanes; ++q) lane[q] += x[c0 + q];
    for (int64_t q = 0; c0 + q < n; ++q) lane[q] += x[c0 + q];
}
template <typename T>
[[gnu::always_inline]] inline T lanes_added(const T* lane) {
    T sum = 0;
    for (int64_t q = 0; q < kLanes; ++q) sum += lane[q];
    return sum;
}

// The largest of m and x[0, n), in lanes as the lane sum (max is exact in any
// order; the lanes let a vector loop compute it). NaN never wins a
// comparison, as in std::max(m, x).
template <typename T>
[[gnu::always_inline]] inline T lane_max(T m, const T* x, int64_t n) {
    T lane[kLanes];
    for (int64_t q = 0; q < kLanes; ++q) lane[q] = m;
    int64_t c0 = 0;
    for (; c0 + kLanes <= n; c0 += kLanes)
        for (int64_t q = 0; q < kLanes; ++q) lane[q] = lane[q] < x[c0 + q] ? x[c0 + q] : lane[q];
    for (int64_t q = 0; c0 + q < n; ++q) lane[q] = lane[q] < x[c0 + q] ? x[c0 + q] : lane[q];
    for (int64_t q = 0; q < kLanes; ++q) m = m < lane[q] ? lane[q] : m;
    return m;
}

// The steps below take a block's rows and cols, and `first`: row r's
// scores are its columns [0, first + r) (at least none, at most cols), the
// rest masked out by the causal mask (first = cols without it). A masked
// score is -inf, its weight e^(-inf - m) = 0 and its gradient 0, so a
// row's columns from the first multiple of 16 at or past its last score
// (seen_of) are written 0 without computing an exponential or a
// gradient: about half the work on a block on the diagonal. The bits are
// the same: a max never takes -inf over a score, and the lane sum adds the
// same values to the same lanes, less the zeros. Except where a row's
// log-sum-exp is NaN or -inf (a NaN or an infinity among its scores):
// there e^(-inf - lse) is NaN, not 0, and the backward's steps keep the
// whole row, so that the NaNs reach the gradients as before. (Stopping at
// the last score itself, rather than at a multiple of the lanes, measured
// slower: the vector loops' ragged ends ran one element at a time.)
inline int64_t seen_of(int64_t first, int64_t r, int64_t cols) {
    const int64_t scores = std::clamp<int64_t>(first + r, 0, cols);
    return std::min(cols, (scores + kLanes - 1) / kLanes * kLanes);
}

// One step of the online softmax over a block s (rows x cols, row stride
// ld; rows <= kBlock) of scaled, masked scores, with each row's running
// max m, running sum l and output so far o (rows x Ev, contiguous):
//   m' = max(m, max_c s_c);  s_c = e^(s_c - m');  a = e^(m - m')
//   l = l a + (lane sum of s);   o *= a;  m = m'
// A row whose scores are all -inf so far (m' = -inf) gets weights 0 and
// keeps its m, l and o. Each row's maximum must be known before its
// exponentials start, and the lane sum's last step, its 16 lanes added one
// after another, is a chain of dependent adds: either would stall each row
// if the row ran start to finish. So the maxima of all the rows come first,
// then the exponentials, then the lane sums' last steps, each a loop over
// the rows in which neighbouring rows overlap. The same operations in the
// same order for each row: the same bits.
template <typename T>
[[gnu::always_inline]] inline void online_softmax_step(T* s, int64_t rows, int64_t cols, int64_t first, int64_t ld,
                                                       T* m, T* l, T* o, int64_t Ev) {
    const T neg_inf = -std::numeric_limits<T>::infinity();
    T lanes[kBlock][kLanes], alpha[kBlock], m_new[kBlock];
    for (int64_t r = 0; r < rows; ++r) {
        T* p = s + r * ld;
        const int64_t seen = seen_of(first, r, cols);
        for (int64_t c = seen; c < cols; ++c) p[c] = 0;
        m_new[r] = lane_max(m[r], p, seen);
    }
    for (int64_t r = 0; r < rows; ++r) {
        T* p = s + r * ld;
        const int64_t seen = seen_of(first, r, cols);
        if (m_new[r] == neg_inf) { // every key so far masked out: nothing to add yet
            for (int64_t c = 0; c < seen; ++c) p[c] = 0;
            continue;
        }
        alpha[r] = exponential(m[r] - m_new[r]);
        for (int64_t c = 0; c < seen; ++c) p[c] = exponential(p[c] - m_new[r]);
        lane_partials(p, seen, lanes[r]);
        m[r] = m_new[r];
    }
    for (int64_t r = 0; r < rows; ++r) {
        if (m[r] == neg_inf) continue; // the rows left alone above
        l[r] = l[r] * alpha[r] + lanes_added(lanes[r]);
        T* orow = o + r * Ev;
        for (int64_t e = 0; e < Ev; ++e) orow[e] *= alpha[r];
    }
}

EMBER_VECTOR_CLONES_512
void online_softmax_block(float* s, int64_t rows, int64_t cols, int64_t first, int64_t ld, float* m, float* l, float* o,
                          int64_t Ev) {
    online_softmax_step(s, rows, cols, first, ld, m, l, o, Ev);
}
void online_softmax_block(double* s, int64_t rows, int64_t cols, int64_t first, int64_t ld, double* m, double* l,
                          double* o, int64_t Ev) {
    online_softmax_step(s, rows, cols, first, ld, m, l, o, Ev);
}

// The scores' scale: row r's columns [0, first + r) times scale, the rest
// (keys the causal mask hides; none without it, first = cols) -inf.
template <typename T>
[[gnu::always_inline]] inline void scale_scores_step(T* s, int64_t rows, int64_t cols, int64_t first, int64_t ld,
                                                     T scale) {
    for (int64_t r = 0; r < rows; ++r) {
        T* row = s + r * ld;
        const int64_t seen = std::clamp<int64_t>(first + r, 0, cols);
        for (int64_t c = 0; c < seen; ++c) row[c] *= scale;
        for (int64_t c = seen; c < cols; ++c) row[c] = -std::numeric_limits<T>::infinity();
    }
}

EMBER_VECTOR_CLONES_512
void scale_scores(float* s, int64_t rows, int64_t cols, int64_t first, int64_t ld, float scale) {
    scale_scores_step(s, rows, cols, first, ld, scale);
}
void scale_scores(double* s, int64_t rows, int64_t cols, int64_t first, int64_t ld, double scale) {
    scale_scores_step(s, rows, cols, first, ld, scale);
}

// The forward's last step: out_re = o_re / l_r for rows x Ev (o
// contiguous; out's rows ors apart, its columns contiguous).
template <typename T>
[[gnu::always_inline]] inline void divide_rows_step(const T* o, const T* l, int64_t rows, int64_t Ev, T* out,
                                                    int64_t ors) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t e = 0; e < Ev; ++e) out[r * ors + e] = o[r * Ev + e] / l[r];
}

EMBER_VECTOR_CLONES_512
void divide_rows(const float* o, const float* l, int64_t rows, int64_t Ev, float* out, int64_t ors) {
    divide_rows_step(o, l, rows, Ev, out, ors);
}
void divide_rows(const double* o, const double* l, int64_t rows, int64_t Ev, double* out, int64_t ors) {
    divide_rows_step(o, l, rows, Ev, out, ors);
}

// The backward's weights: s_rc = e^(s_rc - lse_r), the softmax recomputed
// from the scores and each row's log-sum-exp.
template <typename T>
[[gnu::always_inline]] inline void softmax_from_lse_step(T* s, int64_t rows, int64_t cols, int64_t first, int64_t ld,
                                                         const T* lse) {
    for (int64_t r = 0; r < rows; ++r) {
        T* p = s + r * ld;
        const T x = lse[r];
        // A NaN or -inf lse: e^(-inf - lse) is NaN, so the whole row.
        const int64_t seen = x > -std::numeric_limits<T>::infinity() ? seen_of(first, r, cols) : cols;
        for (int64_t c = 0; c < seen; ++c) p[c] = exponential(p[c] - x);
        for (int64_t c = seen; c < cols; ++c) p[c] = 0;
    }
}

EMBER_VECTOR_CLONES_512
void softmax_from_lse(float* s, int64_t rows, int64_t cols, int64_t first, int64_t ld, const float* lse) {
    softmax_from_lse_step(s, rows, cols, first, ld, lse);
}
void softmax_from_lse(double* s, int64_t rows, int64_t cols, int64_t first, int64_t ld, const double* lse) {
    softmax_from_lse_step(s, rows, cols, first, ld, lse);
}

// The backward's score gradient, in dp's place: dp_rc = p_rc (dp_rc - D_r)
// * scale, except 0 where p_rc = 0 (a masked key) or the row's every key is
// masked (lse_r = -inf): as masked_fill's backward, no gradient there.
template <typename T>
[[gnu::always_inline]] inline void score_gradient_step(T* dp, const T* p, int64_t rows, int64_t cols, int64_t first,
                                                       int64_t ld, const T* d, const T* lse, T scale) {
    for (int64_t r = 0; r < rows; ++r) {
        T* g = dp + r * ld;
        const T* pr = p + r * ld;
        const T dr = d[r];
        if (lse[r] == -std::numeric_limits<T>::infinity()) {
            for (int64_t c = 0; c < cols; ++c) g[c] = 0;
            continue;
        }
        // A NaN lse (-inf returned above): the whole row, as softmax_from_lse.
        const int64_t seen = lse[r] > -std::numeric_limits<T>::infinity() ? seen_of(first, r, cols) : cols;
        for (int64_t c = 0; c < seen; ++c) g[c] = pr[c] == T(0) ? T(0) : pr[c] * (g[c] - dr) * scale;
        for (int64_t c = seen; c < cols; ++c) g[c] = 0;
    }
}

EMBER_VECTOR_CLONES_512
void score_gradient(float* dp, const float* p, int64_t rows, int64_t cols, int64_t first, int64_t ld, const float* d,
                    const float* lse, float scale) {
    score_gradient_step(dp, p, rows, cols, first, ld, d, lse, scale);
}
void score_gradient(double* dp, const double* p, int64_t rows, int64_t cols, int64_t first, int64_t ld, const double* d,
                    const double* lse, double scale) {
    score_gradient_step(dp, p, rows, cols, first, ld, d, lse, scale);
}

// Dropout on one row of weights p[0, cols), cols <= 64: p_c * keep where
// bit c of `bits` is 1, else 0.
template <typename T>
[[gnu::always_inline]] inline void keep_where_step(T* p, int64_t cols, uint64_t bits, T keep) {
    for (int64_t c = 0; c < cols; ++c) p[c] = (bits >> c) & 1 ? p[c] * keep : T(0);
}

EMBER_VECTOR_CLONES_512
void keep_where(float* p, int64_t cols, uint64_t bits, float keep) { keep_where_step(p, cols, bits, keep); }
void keep_where(double* p, int64_t cols, uint64_t bits, double keep) { keep_where_step(p, cols, bits, keep); }

} // namespace

} // namespace ember::internal
