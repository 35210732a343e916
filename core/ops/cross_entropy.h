// The loops that define cross_entropy's results, over rows of logits:
// included by the op (cross_entropy.cpp) and by its fast copy
// (core/kernels/cross_entropy.cpp), which compiles these same loops for
// AVX2 too, so the two are one source. Private. Tests: tests/test_loss.cpp,
// tests/test_kernels.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/loops/exponential.h"

namespace ember::internal {

// The forward over n rows of c logits x, in two passes: lse_i = log sum_j
// e^(x_ij) into lse (each row on its own, so the fast copy splits the rows
// between threads), then the sum over counted rows (target not
// ignore_index) of lse_i - x[i, t_i], added in row order, returned.
template <typename T>
void cross_entropy_lse_rows(const T* x, int64_t n, int64_t c, double* lse) {
    for (int64_t i = 0; i < n; ++i) {
        const T* row = x + i * c;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < c; ++j) m = std::max(m, row[j]);
        // The exponentials in x's dtype (as PyTorch's log_softmax), their sum in double.
        const double sum = sum_exp(row, 1, c, m);
        lse[i] = static_cast<double>(m) + std::log(sum);
    }
}
template <typename T>
double cross_entropy_total(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                           const double* lse) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) // -log softmax(x)[t] = lse - x[t]
        if (targets[i] != ignore_index) total += lse[i] - static_cast<double>(x[i * c + targets[i]]);
    return total;
}
template <typename T>
double cross_entropy_forward_rows(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                  double* lse) {
    cross_entropy_lse_rows(x, n, c, lse);
    return cross_entropy_total(x, targets, n, c, ignore_index, lse);
}

// Its backward: dx_ij = scale * (softmax_ij - [j == t_i]) for counted rows,
// 0 for ignored ones, with softmax_ij = e^(x_ij - lse_i) in x's dtype.
template <typename T>
void cross_entropy_backward_rows(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                 const double* lse, double scale, T* dx) {
    for (int64_t i = 0; i < n; ++i) {
        T* drow = dx + i * c;
        if (targets[i] == ignore_index) {
            for (int64_t j = 0; j < c; ++j) drow[j] = T(0);
            continue;
        }
        for (int64_t j = 0; j < c; ++j)
            drow[j] = static_cast<T>(
                static_cast<double>(exponential(static_cast<T>(static_cast<double>(x[i * c + j]) - lse[i]))) * scale);
        drow[targets[i]] -= static_cast<T>(scale);
    }
}

} // namespace ember::internal
