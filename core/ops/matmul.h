// The matrix product on raw pointers and strides that matmul and linear
// run, and its split between threads. Private (ember's own files and
// tests).
//
// gemm(a, b, c) computes c = a @ b (c += a @ b when accumulating), each
// element summed in increasing k. Its definition, in matmul.cpp, is a plain
// loop that rounds after every multiply and add; when the fast kernels are
// on (core/kernels/dispatch.h) it runs core/kernels/gemm.cpp's instead: the
// same bits for float64 and on a CPU without AVX2, and for float32 with
// AVX2 and FMA products whose multiply-adds are fused, so they differ in the
// last bits (docs/matmul.md). docs/matmul.md explains both; tests:
// tests/test_matmul.cpp, tests/test_kernels.cpp.
#pragma once

#include <cstdint>

#include "core/loops/parallel.h"

namespace ember::internal {

// A matrix seen through its strides: element (i, j) is data[i*row_stride +
// j*col_stride], so a transposed view is multiplied where it lies.
template <typename T>
struct MatrixRef {
    T* data;
    int64_t rows, cols;
    int64_t row_stride, col_stride;
    T& at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// c = a @ b, or c += a @ b when accumulate. a is (M,K), b (K,N), c (M,N); c
// must not overlap a or b. Results do not depend on the thread count.
void gemm(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// gemm's definition, which gemm runs when the fast kernels are off: rows
// of C in i-k-j order, each element summed in increasing k from its start
// value, rounding after every multiply and every add (matmul.cpp). The fast
// kernels run it too, for products too small to block, and tests compare
// them with it.
void gemm_plain(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm_plain(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// Multiply-adds below which a product stays on the calling thread: a fork
// and a join cost more than the work (docs/performance.md).
inline constexpr int64_t kGemmParallelWork = 1 << 18;

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
