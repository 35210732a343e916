// The AVX2/FMA register tile of the SGEMM (core/gemm.cpp): a 6x16 block of
// C += (6 rows of A) @ (16 columns of B), shared by the packed driver
// (core/gemm_packed.cpp) and the direct one for small products (below).
//
// This file alone is compiled with -mavx2 -mfma (meson.build); gemm.cpp
// calls it only after checking at run time that the CPU has both, so ember
// still runs on a CPU without AVX2 (through the portable kernel).
//
// Why 6x16: an AVX2 core has 16 vector registers of 8 floats. 6 rows x 2
// vectors of C take 12 registers, two for the current row of B, one for a
// broadcast element of A: 15 in all. Each step of k then issues 12
// independent FMAs (2 per row) against 2 loads of B and 6 broadcasts of A,
// enough to keep both FMA units busy without waiting on a result.
// docs/matmul.md draws it; tests/test_matmul.cpp checks it against gemm_reference.
#include <cstdint>

#include "gemm_packed.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace ember::detail {

#if defined(__AVX2__) && defined(__FMA__)

// The 6 x 16 tile of C both drivers share: c (row stride ldc) = (add ? c : 0)
// + a @ b, with row r of A at a[r] (its elements acs apart) and B's rows brs
// apart, 16 contiguous floats each (only those the masks m0, m1 select when
// Masked). Each c element sums over p in increasing order, one fused
// multiply-add per step, so the packed and the direct driver give identical
// bits.
template <bool Masked>
static void tile_6x16(int64_t k, const float* const a[6], int64_t acs, const float* b, int64_t brs, __m256i m0,
                        __m256i m1, float* c, int64_t ldc, bool add) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (add) {
        c00 = _mm256_loadu_ps(c + 0 * ldc), c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
        c10 = _mm256_loadu_ps(c + 1 * ldc), c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
        c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t p = 0; p < k; ++p) {
        // One row of B (16 floats, two vectors), then each of the 6 elements
        // of A's column p broadcast and multiplied into its row of C.
        const float* bp = b + p * brs;
        const __m256 b0 = Masked ? _mm256_maskload_ps(bp, m0) : _mm256_loadu_ps(bp);
        const __m256 b1 = Masked ? _mm256_maskload_ps(bp + 8, m1) : _mm256_loadu_ps(bp + 8);
        const int64_t o = p * acs;
        __m256 ai = _mm256_broadcast_ss(a0 + o);
        c00 = _mm256_fmadd_ps(ai, b0, c00), c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(a1 + o);
        c10 = _mm256_fmadd_ps(ai, b0, c10), c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(a2 + o);
        c20 = _mm256_fmadd_ps(ai, b0, c20), c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(a3 + o);
        c30 = _mm256_fmadd_ps(ai, b0, c30), c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(a4 + o);
        c40 = _mm256_fmadd_ps(ai, b0, c40), c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(a5 + o);
        c50 = _mm256_fmadd_ps(ai, b0, c50), c51 = _mm256_fmadd_ps(ai, b1, c51);
    }
    _mm256_storeu_ps(c + 0 * ldc, c00), _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    _mm256_storeu_ps(c + 1 * ldc, c10), _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

// The packed driver's micro-kernel: a packed as kc groups of 6
// (a[p*6 + i] = A[i][p]) and b as kc rows of 16 (b[p*16 + j] = B[p][j]).
void kernel_6x16_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool add) {
    const float* rows[6] = {a, a + 1, a + 2, a + 3, a + 4, a + 5};
    const __m256i all = _mm256_set1_epi32(-1);
    tile_6x16<false>(kc, rows, 6, b, 16, all, all, c, ldc, add);
}

// ---- the direct driver, for small products -----------------------------------------------

void gemm_direct_rows_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool add,
                           int64_t row_begin, int64_t row_end) {
    const int64_t k = a.cols;
    alignas(32) int32_t lanes[16];
    alignas(32) float local[6 * 16];
    for (int64_t j0 = 0; j0 < c.cols; j0 += 16) {
        const int64_t cols = c.cols - j0 < 16 ? c.cols - j0 : 16;
        for (int j = 0; j < 16; ++j) lanes[j] = j < cols ? -1 : 0;
        const __m256i m0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
        const __m256i m1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes + 8));
        for (int64_t i0 = row_begin; i0 < row_end; i0 += 6) {
            const int64_t rows = row_end - i0 < 6 ? row_end - i0 : 6;
            // Past the last row, repeat it: the extra rows are computed and dropped.
            const float* arow[6];
            for (int64_t r = 0; r < 6; ++r) arow[r] = a.data + (i0 + (r < rows ? r : rows - 1)) * a.row_stride;
            float* cij = c.data + i0 * c.row_stride + j0;
            if (rows == 6 && cols == 16) {
                tile_6x16<false>(k, arow, a.col_stride, b.data + j0, b.row_stride, m0, m1, cij, c.row_stride, add);
                continue;
            }
            // A ragged edge: work in a local tile, copy the valid part in and out.
            if (add)
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t j = 0; j < cols; ++j) local[r * 16 + j] = cij[r * c.row_stride + j];
            if (cols == 16) tile_6x16<false>(k, arow, a.col_stride, b.data + j0, b.row_stride, m0, m1, local, 16, add);
            else tile_6x16<true>(k, arow, a.col_stride, b.data + j0, b.row_stride, m0, m1, local, 16, add);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < cols; ++j) cij[r * c.row_stride + j] = local[r * 16 + j];
        }
    }
}

#else

// Built without AVX2 (another architecture): the same arithmetic in plain
// C++, so the library links. gemm.cpp never calls it there, since
// cpu_has_avx2_fma() is false.
void kernel_6x16_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool add) {
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 16; ++j) {
            float sum = add ? c[i * ldc + j] : 0.0f;
            for (int64_t p = 0; p < kc; ++p) sum += a[p * 6 + i] * b[p * 16 + j];
            c[i * ldc + j] = sum;
        }
}

void gemm_direct_rows_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool add,
                           int64_t row_begin, int64_t row_end) {
    for (int64_t i = row_begin; i < row_end; ++i)
        for (int64_t j = 0; j < c.cols; ++j) {
            float sum = add ? c.at(i, j) : 0.0f;
            for (int64_t p = 0; p < a.cols; ++p) sum += a.at(i, p) * b.at(p, j);
            c.at(i, j) = sum;
        }
}

#endif

} // namespace ember::detail
