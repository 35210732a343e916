// cross_entropy's rows, compiled for AVX2 too: see cross_entropy.h. The
// loops are those of core/ops/cross_entropy.cpp, operation for operation.
// Tests: tests/test_kernels.cpp.
#include "core/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/kernels/vectorize.h"
#include "core/loops/exponential.h"

namespace ember::internal {

namespace {

template <typename T>
EMBER_VECTOR_CLONES double forward(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                   double* lse) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
        const T* row = x + i * c;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < c; ++j) m = std::max(m, row[j]);
        lse[i] = static_cast<double>(m) + std::log(sum_exp(row, 1, c, m));
        if (targets[i] != ignore_index) total += lse[i] - static_cast<double>(row[targets[i]]);
    }
    return total;
}

template <typename T>
EMBER_VECTOR_CLONES void backward(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
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

} // namespace

double cross_entropy_forward_rows(const float* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                  double* lse) {
    return forward(x, targets, n, c, ignore_index, lse);
}
double cross_entropy_forward_rows(const double* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                  double* lse) {
    return forward(x, targets, n, c, ignore_index, lse);
}
void cross_entropy_backward_rows(const float* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                 const double* lse, double scale, float* dx) {
    backward(x, targets, n, c, ignore_index, lse, scale, dx);
}
void cross_entropy_backward_rows(const double* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                 const double* lse, double scale, double* dx) {
    backward(x, targets, n, c, ignore_index, lse, scale, dx);
}

} // namespace ember::internal
