// The AVX-512 register tile of the SGEMM (gemm.h): a 14x32 block of
// C += (14 rows of A) @ (32 columns of B), for the packed driver
// (gemm_packed.cpp). This file alone is compiled with -mavx512f -mfma
// (meson.build); gemm.cpp calls it only after checking at run time that the
// CPU has AVX-512F and that the tile runs faster there than the AVX2 one.
// docs/matmul.md; tests/test_kernels.cpp checks its bits against the AVX2 tile.
#include <algorithm>
#include <chrono>
#include <cstdint>

#include <immintrin.h>

#include "core/kernels/gemm_packed.h"

#if !defined(__AVX512F__) || !defined(__FMA__)
#error "gemm_avx512.cpp is compiled with -mavx512f -mfma (meson.build)"
#endif

// Why 14x32: AVX-512 has 32 vector registers of 16 floats. 14 rows x 2
// vectors of C take 28 registers, two for the current row of B, one for a
// broadcast element of A: 31 in all. Each step of k issues 28 independent
// fused multiply-adds against 2 loads of B and 14 broadcasts of A, enough
// to keep both 512-bit FMA units busy. Each C element sums over p in
// increasing order, one fused multiply-add per step, exactly as the 6x16
// AVX2 tile does: the two give the same bits.

namespace ember::internal {

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

// The direct driver's tile: c (R rows x up to 32 columns, row stride ldc)
// = (add ? c : 0) + a @ b, with row r of A at a[r] (elements acs apart) and
// B's rows brs apart, of which the columns in masks m0 (0-15) and m1 (16-31)
// are read and written; only the first `rows` rows are stored. V = 1 when
// m1 is empty. Masked loads and stores take the ragged right edge of C in
// the same loop, and the sums are the packed tile's: one fused multiply-add
// per k in increasing k.
template <int R, int V>
void direct_tile(int64_t k, const float* const a[], int64_t acs, const float* b, int64_t brs, __mmask16 m0,
                 __mmask16 m1, float* c, int64_t ldc, int64_t rows, bool add) {
    const __mmask16 mask[2] = {m0, m1};
    __m512 acc[R][V];
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < V; ++v)
            acc[i][v] = add && i < rows ? _mm512_maskz_loadu_ps(mask[v], c + i * ldc + 16 * v) : _mm512_setzero_ps();
    for (int64_t p = 0; p < k; ++p) {
        __m512 bv[V];
        for (int v = 0; v < V; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + p * brs + 16 * v);
#pragma GCC unroll 14
        for (int i = 0; i < R; ++i) {
            const __m512 ai = _mm512_set1_ps(a[i][p * acs]);
            for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 14
    for (int i = 0; i < R; ++i)
        if (i < rows)
            for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(c + i * ldc + 16 * v, mask[v], acc[i][v]);
}

// The columns selected of 16: the first n (0 <= n <= 16).
__mmask16 first_columns(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

} // namespace

void gemm_direct_rows_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool add,
                             int64_t row_begin, int64_t row_end) {
    constexpr int R = kDirectRowsAvx512;
    for (int64_t j0 = 0; j0 < c.cols; j0 += 32) {
        const int64_t cols = std::min<int64_t>(32, c.cols - j0);
        const __mmask16 m0 = first_columns(cols), m1 = first_columns(cols - 16 > 0 ? cols - 16 : 0);
        for (int64_t i0 = row_begin; i0 < row_end; i0 += R) {
            const int64_t rows = std::min<int64_t>(R, row_end - i0);
            const float* arow[R];
            clamped_rows<R>(a, i0, rows, 0, arow);
            float* cij = c.data + i0 * c.row_stride + j0;
            // The tile: 1 or 2 vectors wide, R rows high, or 8 or 4 for a
            // panel's last rows (a C of at most 8 rows, attention's at T = 8;
            // the 4 left of a 16-row strip of its scores), so as not to compute 12.
            using Tile = void (*)(int64_t, const float* const[], int64_t, const float*, int64_t, __mmask16, __mmask16,
                                  float*, int64_t, int64_t, bool);
            static constexpr Tile kTiles[2][3] = {{direct_tile<4, 1>, direct_tile<8, 1>, direct_tile<R, 1>},
                                                  {direct_tile<4, 2>, direct_tile<8, 2>, direct_tile<R, 2>}};
            const Tile tile = kTiles[cols > 16][rows > 8 ? 2 : rows > 4 ? 1 : 0];
            tile(a.cols, arow, a.col_stride, b.data + j0, b.row_stride, m0, m1, cij, c.row_stride, rows, add);
        }
    }
}

double fma_rate_avx512(int64_t steps) {
    __m512 acc[24];
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s)
#pragma GCC unroll 24
        for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    volatile float sink = 0; // every accumulator used, so that the compiler keeps the loop
    for (int i = 0; i < 24; ++i) sink = sink + _mm512_cvtss_f32(acc[i]);
    return static_cast<double>(steps) * 24 * 16 / seconds;
}

void kernel_14x32_avx512(int64_t kc, const float* const a[14], int64_t acs, const float* b, float* c, int64_t ldc,
                         bool add) {
    bool packed = acs == 14;
    for (int i = 1; i < 14 && packed; ++i) packed = a[i] == a[0] + i;
    if (packed) tile_14x32<true>(kc, a, acs, b, c, ldc, add);
    else tile_14x32<false>(kc, a, acs, b, c, ldc, add);
}


} // namespace ember::internal
