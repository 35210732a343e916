// The AVX2/FMA micro-kernel of the packed SGEMM (core/gemm.cpp): a 6x16
// block of C += (6 x kc panel of A) @ (kc x 16 panel of B).
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

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace ember::detail {

#if defined(__AVX2__) && defined(__FMA__)

// c (6 rows, 16 columns, row stride ldc) = (add ? c : 0) + a @ b, where a is
// packed as kc groups of 6 (a[p*6 + i] = A[i][p]) and b as kc rows of 16
// (b[p*16 + j] = B[p][j]). Each c element sums over p in increasing order,
// one fused multiply-add per step.
void kernel_6x16_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool add) {
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
    for (int64_t p = 0; p < kc; ++p) {
        // One row of the B panel (16 floats, two vectors), then each of the
        // 6 elements of A's column p broadcast and multiplied into its row of C.
        const __m256 b0 = _mm256_load_ps(b + p * 16);
        const __m256 b1 = _mm256_load_ps(b + p * 16 + 8);
        const float* ap = a + p * 6;
        __m256 ai = _mm256_broadcast_ss(ap + 0);
        c00 = _mm256_fmadd_ps(ai, b0, c00), c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(ap + 1);
        c10 = _mm256_fmadd_ps(ai, b0, c10), c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(ap + 2);
        c20 = _mm256_fmadd_ps(ai, b0, c20), c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(ap + 3);
        c30 = _mm256_fmadd_ps(ai, b0, c30), c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(ap + 4);
        c40 = _mm256_fmadd_ps(ai, b0, c40), c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(ap + 5);
        c50 = _mm256_fmadd_ps(ai, b0, c50), c51 = _mm256_fmadd_ps(ai, b1, c51);
    }
    _mm256_storeu_ps(c + 0 * ldc, c00), _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    _mm256_storeu_ps(c + 1 * ldc, c10), _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
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

#endif

} // namespace ember::detail
