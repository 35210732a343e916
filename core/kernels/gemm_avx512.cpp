// The AVX-512 register tile of the SGEMM (gemm.h): a 14x32 block of
// C += (14 rows of A) @ (32 columns of B), for the packed driver
// (gemm_packed.cpp). This file alone is compiled with -mavx512f -mfma
// (meson.build); gemm.cpp calls it only after checking at run time that the
// CPU has AVX-512F and that the tile runs faster there than the AVX2 one.
// docs/matmul.md; tests/test_matmul.cpp checks its bits against the AVX2 tile.
#include <cstdint>

#include "core/kernels/gemm_packed.h"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
#endif

// Why 14x32: AVX-512 has 32 vector registers of 16 floats. 14 rows x 2
// vectors of C take 28 registers, two for the current row of B, one for a
// broadcast element of A: 31 in all. Each step of k issues 28 independent
// fused multiply-adds against 2 loads of B and 14 broadcasts of A, enough
// to keep both 512-bit FMA units busy. Each C element sums over p in
// increasing order, one fused multiply-add per step, exactly as the 6x16
// AVX2 tile does: the two give the same bits.

namespace ember::internal {

#if defined(__AVX512F__) && defined(__FMA__)

namespace {

// The tile; Packed: row i of A is a[0] + i, its elements 14 apart (a packed
// panel), which needs one pointer instead of fourteen.
template <bool Packed>
void tile_14x32(int64_t kc, const float* const a[14], int64_t acs, const float* b, float* c, int64_t ldc, bool add) {
    __m512 lo[14], hi[14]; // columns 0-15 and 16-31 of each row of C
#pragma GCC unroll 14
    for (int i = 0; i < 14; ++i) {
        lo[i] = add ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
        hi[i] = add ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    }
    const float* a0 = a[0];
    for (int64_t p = 0; p < kc; ++p) {
        const __m512 b0 = _mm512_loadu_ps(b + p * 32), b1 = _mm512_loadu_ps(b + p * 32 + 16);
#pragma GCC unroll 14
        for (int i = 0; i < 14; ++i) {
            const __m512 ai = _mm512_set1_ps(Packed ? a0[p * 14 + i] : a[i][p * acs]);
            lo[i] = _mm512_fmadd_ps(ai, b0, lo[i]);
            hi[i] = _mm512_fmadd_ps(ai, b1, hi[i]);
        }
    }
#pragma GCC unroll 14
    for (int i = 0; i < 14; ++i) {
        _mm512_storeu_ps(c + i * ldc, lo[i]);
        _mm512_storeu_ps(c + i * ldc + 16, hi[i]);
    }
}

} // namespace

void kernel_14x32_avx512(int64_t kc, const float* const a[14], int64_t acs, const float* b, float* c, int64_t ldc,
                         bool add) {
    bool packed = acs == 14;
    for (int i = 1; i < 14 && packed; ++i) packed = a[i] == a[0] + i;
    if (packed) tile_14x32<true>(kc, a, acs, b, c, ldc, add);
    else tile_14x32<false>(kc, a, acs, b, c, ldc, add);
}

#else

// Built without AVX-512 (another architecture, or -Dkernels=reference): the
// same arithmetic in plain C++, so the library links. gemm.cpp never calls
// it there, since gemm_uses_avx512() is false.
void kernel_14x32_avx512(int64_t kc, const float* const a[14], int64_t acs, const float* b, float* c, int64_t ldc,
                         bool add) {
    for (int i = 0; i < 14; ++i)
        for (int j = 0; j < 32; ++j) {
            float sum = add ? c[i * ldc + j] : 0.0f;
            for (int64_t p = 0; p < kc; ++p) sum += a[i][p * acs] * b[p * 32 + j];
            c[i * ldc + j] = sum;
        }
}

#endif

} // namespace ember::internal
