// Matrix-multiply kernels on raw pointers and strides: C = A @ B.
//
// Each operand is a MatrixRef: a pointer plus row and column strides in
// elements, so a transposed or sliced view is multiplied where it lies,
// without a copy. gemm() is the cache-blocked, OpenMP-parallel kernel that
// matmul uses; gemm_reference() is the plain triple loop kept beside it, which
// tests compare it with. docs/matmul.md explains the blocking.
// Tests: tests/test_matmul.cpp.
#pragma once

#include <cstdint>

namespace ember {

template <typename T>
struct MatrixRef {
    T* data;
    int64_t rows, cols;
    int64_t row_stride, col_stride; // element (i, j) is data[i*row_stride + j*col_stride]
    T& at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// c = a @ b, or c += a @ b when accumulate. a is (M,K), b (K,N), c (M,N);
// c must not overlap a or b. Each c element sums its K products in increasing
// k order within blocks of K, so results do not depend on the thread count.
void gemm(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// The same product as three plain loops, for tests to compare gemm against.
void gemm_reference(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm_reference(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// Multiply-adds below which gemm stays on the calling thread.
inline constexpr int64_t kGemmParallelWork = 1 << 18;

} // namespace ember
