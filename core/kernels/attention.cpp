// Fused attention's element-wise steps: see attention.h. Each marked
// function is compiled for baseline x86-64, AVX2 and AVX-512 (vectorize.h);
// its loops are written out in lanes so that every copy adds and compares
// in the same order. Tests: tests/test_sdpa.cpp (and its thread-count case).
#include "core/kernels/attention.h"

#include <algorithm>
#include <limits>

#include "core/kernels/vectorize.h"
#include "core/loops/exponential.h"

namespace ember::internal {

namespace {

constexpr int64_t kLanes = 16;

template <typename T>
[[gnu::always_inline]] inline T lane_sum_impl(const T* x, int64_t n) {
    T lane[kLanes] = {};
    int64_t c0 = 0;
    for (; c0 + kLanes <= n; c0 += kLanes)
        for (int64_t q = 0; q < kLanes; ++q) lane[q] += x[c0 + q];
    for (int64_t q = 0; c0 + q < n; ++q) lane[q] += x[c0 + q];
    T sum = 0;
    for (int64_t q = 0; q < kLanes; ++q) sum += lane[q];
    return sum;
}

// The largest of m and x[0, n), in lanes as lane_sum (max is exact in any
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

template <typename T>
[[gnu::always_inline]] inline void online_softmax_impl(T* s, int64_t rows, int64_t cols, int64_t ld, T* m, T* l, T* o,
                                                       int64_t Ev) {
    const T neg_inf = -std::numeric_limits<T>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
        T* p = s + r * ld;
        const T m_new = lane_max(m[r], p, cols);
        if (m_new == neg_inf) { // every key so far masked out: nothing to add yet
            for (int64_t c = 0; c < cols; ++c) p[c] = 0;
            continue;
        }
        const T alpha = exponential(m[r] - m_new);
        for (int64_t c = 0; c < cols; ++c) p[c] = exponential(p[c] - m_new);
        l[r] = l[r] * alpha + lane_sum_impl(p, cols);
        m[r] = m_new;
        T* orow = o + r * Ev;
        for (int64_t e = 0; e < Ev; ++e) orow[e] *= alpha;
    }
}

template <typename T>
[[gnu::always_inline]] inline void softmax_from_lse_impl(T* s, int64_t rows, int64_t cols, int64_t ld, const T* lse) {
    for (int64_t r = 0; r < rows; ++r) {
        T* p = s + r * ld;
        const T x = lse[r];
        for (int64_t c = 0; c < cols; ++c) p[c] = exponential(p[c] - x);
    }
}

template <typename T>
[[gnu::always_inline]] inline void score_gradient_impl(T* dp, const T* p, int64_t rows, int64_t cols, int64_t ld,
                                                       const T* d, const T* lse, T scale) {
    for (int64_t r = 0; r < rows; ++r) {
        T* g = dp + r * ld;
        const T* pr = p + r * ld;
        const T dr = d[r];
        if (lse[r] == -std::numeric_limits<T>::infinity()) {
            for (int64_t c = 0; c < cols; ++c) g[c] = 0;
            continue;
        }
        for (int64_t c = 0; c < cols; ++c) g[c] = pr[c] == T(0) ? T(0) : pr[c] * (g[c] - dr) * scale;
    }
}

template <typename T>
[[gnu::always_inline]] inline void keep_where_impl(T* p, int64_t cols, uint64_t bits, T keep) {
    for (int64_t c = 0; c < cols; ++c) p[c] = (bits >> c) & 1 ? p[c] * keep : T(0);
}

} // namespace

EMBER_VECTOR_CLONES_512
void online_softmax_block(float* s, int64_t rows, int64_t cols, int64_t ld, float* m, float* l, float* o, int64_t Ev) {
    online_softmax_impl(s, rows, cols, ld, m, l, o, Ev);
}
void online_softmax_block(double* s, int64_t rows, int64_t cols, int64_t ld, double* m, double* l, double* o,
                          int64_t Ev) {
    online_softmax_impl(s, rows, cols, ld, m, l, o, Ev);
}

float lane_sum(const float* x, int64_t n) { return lane_sum_impl(x, n); }
double lane_sum(const double* x, int64_t n) { return lane_sum_impl(x, n); }

EMBER_VECTOR_CLONES_512
void softmax_from_lse(float* s, int64_t rows, int64_t cols, int64_t ld, const float* lse) {
    softmax_from_lse_impl(s, rows, cols, ld, lse);
}
void softmax_from_lse(double* s, int64_t rows, int64_t cols, int64_t ld, const double* lse) {
    softmax_from_lse_impl(s, rows, cols, ld, lse);
}

EMBER_VECTOR_CLONES_512
void score_gradient(float* dp, const float* p, int64_t rows, int64_t cols, int64_t ld, const float* d, const float* lse,
                    float scale) {
    score_gradient_impl(dp, p, rows, cols, ld, d, lse, scale);
}
void score_gradient(double* dp, const double* p, int64_t rows, int64_t cols, int64_t ld, const double* d,
                    const double* lse, double scale) {
    score_gradient_impl(dp, p, rows, cols, ld, d, lse, scale);
}

EMBER_VECTOR_CLONES_512
void keep_where(float* p, int64_t cols, uint64_t bits, float keep) { keep_where_impl(p, cols, bits, keep); }
void keep_where(double* p, int64_t cols, uint64_t bits, double keep) { keep_where_impl(p, cols, bits, keep); }

} // namespace ember::internal
