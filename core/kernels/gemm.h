// Matrix-multiply kernels on raw pointers and strides: C = A @ B, through
// MatrixRef (a pointer and strides, so a transposed view is multiplied where
// it lies). gemm() picks the AVX2 kernels or the portable one (below);
// gemm_reference() is the plain triple loop tests compare them with. Private:
// ops/matmul.cpp and ops/linear.cpp call them. docs/matmul.md explains the
// kernels; tests: tests/test_matmul.cpp.
#pragma once

#include <cstdint>

#include "core/loops/parallel.h"

// For float32 on a CPU with AVX2 and FMA, gemm() runs a register-tiled
// kernel (gemm_packed.cpp, gemm_avx2.cpp): packed and cache-blocked for large
// products, reading the operands in place for small ones. Otherwise, for
// float64, and whenever the fast kernels are off (dispatch.h), it runs the
// portable cache-blocked kernel (gemm.cpp). All are OpenMP-parallel over
// tiles of C.

namespace ember::internal {

template <typename T>
struct MatrixRef {
    T* data;
    int64_t rows, cols;
    int64_t row_stride, col_stride; // element (i, j) is data[i*row_stride + j*col_stride]
    T& at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// c = a @ b, or c += a @ b when accumulate. a is (M,K), b (K,N), c (M,N);
// c must not overlap a or b. Each c element sums its K products in increasing
// k order (but see kDotRows below), so results do not depend on the thread count. The portable kernel
// rounds after every multiply and add, exactly as gemm_reference; the AVX2
// kernel fuses each multiply-add (one rounding), so it differs from the
// reference in the last bits.
void gemm(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// Products whose A has at most this many rows (contiguous) and whose B is a
// transposed matrix (a Linear layer's W^T on a token or two) are computed
// as dot products of rows, summed in 16 lanes: another order than the
// tiles', fixed by the shape (gemm.cpp says why).
inline constexpr int64_t kDotRows = 4;

// The same product as three plain loops, for tests to compare gemm against.
void gemm_reference(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm_reference(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// out (m.rows x m.cols, row-major) = m, read through its strides. A
// transposed matrix (row stride 1) is copied in 8x8 blocks with AVX2, as
// gemm packs a transposed B; otherwise element by element, in the order
// that reads m's contiguous dim.
void copy_to_row_major(MatrixRef<const float> m, float* out);
void copy_to_row_major(MatrixRef<const double> m, double* out);

// Multiply-adds below which a product stays on the calling thread: a fork
// and a join cost more than the work (docs/performance.md).
inline constexpr int64_t kGemmParallelWork = 1 << 18;

// True when float32 products currently run on the AVX2 kernels; and when
// large ones run on the AVX-512 tile (a CPU with AVX-512F, where that tile
// measured faster than the AVX2 one: gemm.cpp gives the rule).
bool gemm_uses_avx2();
bool gemm_uses_avx512();

// Calls slice(i) for i in [0, count), each slice a product of `work`
// multiply-adds whose gemm splits its own rows between threads. When there
// are many small slices, or enough mid-sized ones to keep every thread
// equally busy, threads take whole slices instead (and each gemm then runs
// on its thread): no fork, join or shared packing per slice. The split
// never changes a result.
template <typename F>
void for_each_gemm_slice(int64_t count, int64_t work, const F& slice) {
    // Whole slices per thread: products under kGemmParallelWork, or at least
    // eight per thread of up to 64 times that (attention's score products).
    const bool by_slice =
        count > 1 && (work < kGemmParallelWork || (count >= 8 * get_num_threads() && work <= 64 * kGemmParallelWork));
    if (!by_slice) {
        for (int64_t i = 0; i < count; ++i) slice(i);
        return;
    }
    parallel_for(0, count, grain_for(work, kGemmParallelWork), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) slice(i);
    });
}

} // namespace ember::internal
