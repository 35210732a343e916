// The loops that define softmax's, log_softmax's and scaled_masked_softmax's
// results, one row at a time: included by the ops (softmax.cpp) and by
// their fast copies (core/kernels/softmax.cpp), which run these same
// functions (or, for short rows, the same operations on several rows at
// once), so the two give the same bits. Private. Tests:
// tests/test_softmax.cpp, tests/test_kernels.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/loops/exponential.h"

// All subtract the row's max before exponentiating, so large logits cannot
// overflow: softmax(x) = e^(x - m) / sum e^(x - m) is the same function for
// any m. A row that is all -inf (fully masked) gives NaN, as in PyTorch.

namespace ember::internal {

// The largest of x[0], x[stride], ... (n of them), -inf for none.
template <typename T>
T row_max(const T* x, int64_t stride, int64_t n) {
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i * stride]);
    return m;
}

// One row of softmax (log = false) or log_softmax (log = true): the row's
// elements are x[0], x[stride], ..., n of them. out may be x itself.
template <typename T>
void softmax_row(const T* x, T* out, int64_t stride, int64_t n, bool log) {
    const T m = row_max(x, stride, n);
    // sum = sum_i e^(x_i - m), accumulated in double. A -inf entry (a masked
    // position) contributes e^-inf = 0 exactly.
    const double sum = sum_exp(x, stride, n, m, log ? nullptr : out);
    if (log) {
        // log_softmax = x - m - log(sum)
        const T log_sum = static_cast<T>(std::log(sum));
        for (int64_t i = 0; i < n; ++i) out[i * stride] = x[i * stride] - m - log_sum;
    } else {
        // softmax = e^(x - m) * (1 / sum), as PyTorch's kernel does.
        const T scale = T(1) / static_cast<T>(sum);
        for (int64_t i = 0; i < n; ++i) out[i * stride] *= scale;
    }
}

// softmax's backward on one row: forward y_i = e^(x_i) / sum_j e^(x_j),
// whose Jacobian is dy_i/dx_k = y_i (delta_ik - y_k). So dx_k = sum_i dy_i
// y_i (delta_ik - y_k) = y_k (dy_k - sum_i dy_i y_i): one dot product per
// row, then one pass.
template <typename T>
void softmax_backward_row(const T* y, const T* dy, T* dx, int64_t stride, int64_t n) {
    T dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += dy[i * stride] * y[i * stride];
    for (int64_t i = 0; i < n; ++i) dx[i * stride] = y[i * stride] * (dy[i * stride] - dot);
}

// log_softmax's backward on one row: forward y_i = x_i - log sum_j e^(x_j),
// so dy_i/dx_k = delta_ik - softmax_k and dx_k = dy_k - softmax_k * sum_i
// dy_i, with softmax_k = e^(y_k).
template <typename T>
void log_softmax_backward_row(const T* y, const T* dy, T* dx, int64_t stride, int64_t n) {
    T total = 0;
    for (int64_t i = 0; i < n; ++i) total += dy[i * stride];
    for (int64_t i = 0; i < n; ++i) dx[i * stride] = dy[i * stride] - exponential(y[i * stride]) * total;
}

// ---- scaled_masked_softmax: one contiguous row of n -----------------------------------------
//
// mask is the row of a bool mask (true = masked out), its elements
// mask_step apart, or null when nothing is masked.

// forward: y = x * s; y = -inf where masked; then softmax in place.
template <typename T>
void scaled_masked_softmax_row(const T* x, T* y, int64_t n, const bool* mask, int64_t mask_step, T s) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
    if (mask)
        for (int64_t i = 0; i < n; ++i) y[i] = mask[i * mask_step] ? -std::numeric_limits<T>::infinity() : y[i];
    softmax_row(y, y, 1, n, false);
}

// backward: softmax's dS = y (dy - sum dy y); the mask's backward zeroes dS
// where masked; the scale's multiplies by s. The same float
// operations in the same order as the three ops one by one, so the bits
// agree too.
template <typename T>
void scaled_masked_softmax_backward_row(const T* y, const T* dy, T* dx, int64_t n, const bool* mask, int64_t mask_step,
                                        T s) {
    T dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += dy[i] * y[i];
    for (int64_t i = 0; i < n; ++i) dx[i] = y[i] * (dy[i] - dot) * s;
    if (mask)
        for (int64_t i = 0; i < n; ++i) dx[i] = mask[i * mask_step] ? T(0) : dx[i];
}

} // namespace ember::internal
