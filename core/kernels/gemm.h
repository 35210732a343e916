// Matrix-multiply kernels on raw pointers and strides: C = A @ B.
//
// Each operand is a MatrixRef: a pointer plus row and column strides in
// elements, so a transposed or sliced view is multiplied where it lies,
// without a copy. gemm() is what matmul calls. For float32 on a CPU with
// AVX2 and FMA it runs a register-tiled kernel (gemm_packed.cpp,
// gemm_avx2.cpp): packed and cache-blocked for large products, reading the
// operands in place for small ones; otherwise, and for float64, a portable
// cache-blocked one (gemm.cpp). All are OpenMP-parallel over tiles of C. gemm_reference() is
// the plain triple loop kept beside them, which tests compare them with.
// docs/matmul.md explains the kernels. Tests: tests/test_matmul.cpp.
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
// k order, so results do not depend on the thread count. The portable kernel
// rounds after every multiply and add, exactly as gemm_reference; the AVX2
// kernel fuses each multiply-add (one rounding), so it differs from the
// reference in the last bits.
void gemm(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// The same product as three plain loops, for tests to compare gemm against.
void gemm_reference(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm_reference(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// Multiply-adds below which gemm stays on the calling thread.
inline constexpr int64_t kGemmParallelWork = 1 << 18;

// Which float32 kernel gemm uses: Auto (the AVX2 one when the CPU has it)
// or Portable. For tests and benchmarks that compare the two; the setting is
// global, like PyTorch's torch.backends flags.
enum class GemmKernel { Auto, Portable };
void set_gemm_kernel(GemmKernel kernel);
// True when float32 products currently run on the AVX2 kernel.
bool gemm_uses_avx2();

} // namespace ember
