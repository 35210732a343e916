// The AVX2/FMA register tile of the SGEMM (gemm.h): a 6x16 block of
// C += (6 rows of A) @ (16 columns of B), shared by the packed driver
// (gemm_packed.cpp) and the direct one for small products (below). This file
// alone is compiled with -mavx2 -mfma (meson.build); gemm.cpp calls it only
// after checking at run time that the CPU has both. docs/matmul.md draws it;
// tests/test_kernels.cpp checks it against gemm_plain.
#include <algorithm>
#include <chrono>
#include <cstdint>

#include <immintrin.h>

#include "core/kernels/gemm_packed.h"

#if !defined(__AVX2__) || !defined(__FMA__)
#error "gemm_avx2.cpp is compiled with -mavx2 -mfma (meson.build)"
#endif

// Why 6x16: an AVX2 core has 16 vector registers of 8 floats. 6 rows x 2
// vectors of C take 12 registers, two for the current row of B, one for a
// broadcast element of A: 15 in all. Each step of k then issues 12
// independent FMAs (2 per row) against 2 loads of B and 6 broadcasts of A,
// enough to keep both FMA units busy without waiting on a result.

namespace ember::internal {

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

// The direct driver's tile for the last R < 6 rows of a column panel (the
// 4 rows left of a 16-row strip of attention's scores): tile_6x16's loop
// on R rows of A, 2R accumulators, C read and written in place. Each C
// element sums over p in increasing order, one fused multiply-add per step,
// so it gives the bits tile_6x16 gives on those rows, without computing
// rows past the end into a local tile and copying the valid ones out.
template <int R>
static void tile_rows_x16(int64_t k, const float* const a[6], int64_t acs, const float* b, int64_t brs, float* c,
                          int64_t ldc, bool add) {
    static_assert(R >= 1 && R < 6);
    __m256 lo[R], hi[R]; // columns 0-7 and 8-15 of each row of C
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
        lo[i] = add ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
        hi[i] = add ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
    }
    for (int64_t p = 0; p < k; ++p) {
        const float* bp = b + p * brs;
        const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        const int64_t o = p * acs;
#pragma GCC unroll 6
        for (int i = 0; i < R; ++i) {
            const __m256 ai = _mm256_broadcast_ss(a[i] + o);
            lo[i] = _mm256_fmadd_ps(ai, b0, lo[i]), hi[i] = _mm256_fmadd_ps(ai, b1, hi[i]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) _mm256_storeu_ps(c + i * ldc, lo[i]), _mm256_storeu_ps(c + i * ldc + 8, hi[i]);
}

// The packed driver's micro-kernel: b packed as kc rows of 16 (b[p*16 + j]
// = B[p][j]), row i of A at a[i] with its elements acs apart (a packed
// panel of A is a[i] = panel + i, acs = 6).
void kernel_6x16_avx2(int64_t kc, const float* const a[6], int64_t acs, const float* b, float* c, int64_t ldc,
                      bool add) {
    const __m256i all = _mm256_set1_epi32(-1);
    tile_6x16<false>(kc, a, acs, b, 16, all, all, c, ldc, add);
}

// ---- thin edges: the last 1 to 4 columns of C ------------------------------------------------
//
// A 6x16 tile spends all 16 columns' work on an edge of C only 1 to 4 columns
// wide, such as the 65th column of lm_head's output: a fifth of that
// product's arithmetic thrown away. Here the rows of A ride in the lanes of
// a vector instead, 8 rows to a vector, two vectors at a time (one fused
// multiply-add waits on the last, so one vector alone would wait), and each
// element of B is broadcast. Each C element still sums over p in increasing
// order, one fused multiply-add per step: the same bits as the tile.

// Vector q of out holds A[row r][p0 + q] in lane r: the 8x8 block of the
// eight rows at columns p0..p0+7, transposed (A's columns contiguous).
static void transposed_8x8(const float* const row[8], int64_t p0, __m256 out[8]) {
    const __m256 r0 = _mm256_loadu_ps(row[0] + p0), r1 = _mm256_loadu_ps(row[1] + p0);
    const __m256 r2 = _mm256_loadu_ps(row[2] + p0), r3 = _mm256_loadu_ps(row[3] + p0);
    const __m256 r4 = _mm256_loadu_ps(row[4] + p0), r5 = _mm256_loadu_ps(row[5] + p0);
    const __m256 r6 = _mm256_loadu_ps(row[6] + p0), r7 = _mm256_loadu_ps(row[7] + p0);
    // Pairs of rows interleaved: t0 = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5], ...
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    // Quads: s0 = column 0 of rows 0-3 | column 4 of rows 0-3, ...
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    // Halves joined: rows 0-3 from one quad, rows 4-7 from its partner.
    out[0] = _mm256_permute2f128_ps(s0, s4, 0x20), out[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    out[1] = _mm256_permute2f128_ps(s1, s5, 0x20), out[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    out[2] = _mm256_permute2f128_ps(s2, s6, 0x20), out[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    out[3] = _mm256_permute2f128_ps(s3, s7, 0x20), out[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// A[rows r][p] for the 8 rows at row[0..7], one per lane.
static __m256 column(const float* const row[8], int64_t p) {
    return _mm256_setr_ps(row[0][p], row[1][p], row[2][p], row[3][p], row[4][p], row[5][p], row[6][p], row[7][p]);
}

// Up to 16 rows of the edge, Cols columns wide.
template <int Cols>
static void edge_16(MatrixRef<const float> a, int64_t i0, const float* b, int64_t brs, MatrixRef<float> c, bool add) {
    const int64_t k = a.cols, rows = std::min<int64_t>(16, a.rows - i0), acs = a.col_stride;
    const float* row[16];
    clamped_rows<16>(a, i0, rows, 0, row);
    alignas(32) float lanes[16];
    __m256 lo[Cols], hi[Cols]; // rows 0-7 and 8-15 of each column
    for (int j = 0; j < Cols; ++j) {
        for (int64_t r = 0; r < 16; ++r) lanes[r] = add && r < rows ? c.at(i0 + r, j) : 0.0f;
        lo[j] = _mm256_load_ps(lanes), hi[j] = _mm256_load_ps(lanes + 8);
    }
    int64_t p = 0;
    if (acs == 1) {
        for (; p + 8 <= k; p += 8) {
            __m256 x[8], y[8];
            transposed_8x8(row, p, x), transposed_8x8(row + 8, p, y);
            for (int q = 0; q < 8; ++q)
                for (int j = 0; j < Cols; ++j) {
                    const __m256 bj = _mm256_broadcast_ss(b + (p + q) * brs + j);
                    lo[j] = _mm256_fmadd_ps(x[q], bj, lo[j]), hi[j] = _mm256_fmadd_ps(y[q], bj, hi[j]);
                }
        }
    }
    for (; p < k; ++p) { // A's rows contiguous (A transposed), columns strided, or the last p < 8
        const __m256 x = a.row_stride == 1 && rows == 16 ? _mm256_loadu_ps(row[0] + p * acs) : column(row, p * acs);
        const __m256 y = a.row_stride == 1 && rows == 16 ? _mm256_loadu_ps(row[8] + p * acs) : column(row + 8, p * acs);
        for (int j = 0; j < Cols; ++j) {
            const __m256 bj = _mm256_broadcast_ss(b + p * brs + j);
            lo[j] = _mm256_fmadd_ps(x, bj, lo[j]), hi[j] = _mm256_fmadd_ps(y, bj, hi[j]);
        }
    }
    for (int j = 0; j < Cols; ++j) {
        _mm256_store_ps(lanes, lo[j]), _mm256_store_ps(lanes + 8, hi[j]);
        for (int64_t r = 0; r < rows; ++r) c.at(i0 + r, j) = lanes[r];
    }
}

void edge_columns_avx2(MatrixRef<const float> a, const float* b, int64_t brs, MatrixRef<float> c, bool add) {
    for (int64_t i0 = 0; i0 < a.rows; i0 += 16) {
        switch (c.cols) {
        case 1: edge_16<1>(a, i0, b, brs, c, add); break;
        case 2: edge_16<2>(a, i0, b, brs, c, add); break;
        case 3: edge_16<3>(a, i0, b, brs, c, add); break;
        default: edge_16<4>(a, i0, b, brs, c, add); break;
        }
    }
}

// ---- B's rows made contiguous --------------------------------------------------------------

void copy_rows_avx2(MatrixRef<const float> b, float* out) {
    const int64_t k = b.rows, n = b.cols;
    int64_t j0 = 0;
    if (b.row_stride == 1) // B is a transposed matrix (k^T, W^T): its columns are contiguous
        for (; j0 + 8 <= n; j0 += 8) {
            const float* col[8];
            for (int64_t r = 0; r < 8; ++r) col[r] = b.data + (j0 + r) * b.col_stride;
            int64_t p = 0;
            for (; p + 8 <= k; p += 8) {
                __m256 v[8];
                transposed_8x8(col, p, v);
                for (int q = 0; q < 8; ++q) _mm256_storeu_ps(out + (p + q) * n + j0, v[q]);
            }
            for (; p < k; ++p)
                for (int64_t r = 0; r < 8; ++r) out[p * n + j0 + r] = col[r][p];
        }
    for (int64_t p = 0; p < k; ++p)
        for (int64_t j = j0; j < n; ++j) out[p * n + j] = b.at(p, j);
}

// ---- packing for the packed driver -----------------------------------------------------------
//
// The packed drivers lay A out in panels of 6 or 14 rows (out[p*6 + i]) and
// B in panels of 16 or 32 columns (out[p*16 + j]). When the copy runs across the
// operand's contiguous dim, one float at a time through both strides, it
// costs as much as a tenth of a large product's time; these do full panels
// with 8x8 transposes or whole-vector moves instead. Copies: same values.

// The first n floats of v (n is 6 or 8) to dst.
static void store_first(float* dst, __m256 v, int n) {
    if (n == 8) {
        _mm256_storeu_ps(dst, v);
        return;
    }
    _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), _mm256_extractf128_ps(v, 1));
}

// n adjacent floats (6 or 8) from src to dst.
static void copy_first(float* dst, const float* src, int n) {
    if (n == 8) {
        _mm256_storeu_ps(dst, _mm256_loadu_ps(src));
        return;
    }
    _mm_storeu_ps(dst, _mm_loadu_ps(src));
    _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4),
                  _mm_loadl_pi(_mm_setzero_ps(), reinterpret_cast<const __m64*>(src + 4)));
}

// A panel of Mr rows (6 or 14), in groups of 8 rows (the last group 6).
template <int Mr>
static void pack_a_panel(MatrixRef<const float> a, int64_t i0, int64_t p0, int64_t kc, float* out) {
    if (a.col_stride == 1) { // rows contiguous: 8 columns of a group's rows at a time, transposed
        for (int g = 0; g < Mr; g += 8) {
            const int n = std::min(8, Mr - g);
            const float* row[8];
            for (int r = 0; r < 8; ++r) row[r] = &a.at(i0 + g + std::min(r, n - 1), p0);
            int64_t p = 0;
            for (; p + 8 <= kc; p += 8) {
                __m256 v[8];
                transposed_8x8(row, p, v);
                for (int q = 0; q < 8; ++q) store_first(out + (p + q) * Mr + g, v[q], n);
            }
            for (; p < kc; ++p)
                for (int i = 0; i < n; ++i) out[p * Mr + g + i] = row[i][p];
        }
    } else { // columns contiguous (a transposed matrix): each step of k is Mr adjacent floats
        for (int64_t p = 0; p < kc; ++p) {
            const float* src = &a.at(i0, p0 + p);
            for (int g = 0; g < Mr; g += 8) copy_first(out + p * Mr + g, src + g, std::min(8, Mr - g));
        }
    }
}

void pack_a_panel_avx2(MatrixRef<const float> a, int64_t i0, int64_t p0, int64_t kc, float* out) {
    pack_a_panel<6>(a, i0, p0, kc, out);
}

void pack_a_panel_14_avx2(MatrixRef<const float> a, int64_t i0, int64_t p0, int64_t kc, float* out) {
    pack_a_panel<14>(a, i0, p0, kc, out);
}

void pack_b_panel_transposed_avx2(MatrixRef<const float> b, int64_t p0, int64_t kc, int64_t j0, float* out,
                                  int64_t ldo) {
    const float* col[16];
    for (int64_t j = 0; j < 16; ++j) col[j] = &b.at(p0, j0 + j);
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
        __m256 lo[8], hi[8];
        transposed_8x8(col, p, lo), transposed_8x8(col + 8, p, hi);
        for (int q = 0; q < 8; ++q) {
            _mm256_storeu_ps(out + (p + q) * ldo, lo[q]);
            _mm256_storeu_ps(out + (p + q) * ldo + 8, hi[q]);
        }
    }
    for (; p < kc; ++p)
        for (int64_t j = 0; j < 16; ++j) out[p * ldo + j] = col[j][p];
}

// ---- narrow panels: 5 to 8 columns ----------------------------------------------------------
//
// A panel of C 5 to 8 columns wide (all of C, for attention's (T,T) scores
// at T = 8) fits one vector per row. 8 rows of C at a time in 8 registers:
// each step of k loads one row of B (masked to the panel's width),
// broadcasts 8 elements of A and issues 8 independent fused multiply-adds.
// Each C element sums over p in increasing order, one fused multiply-add per
// step: the bits of the 6x16 tile.
static void tile_8x8(int64_t k, const float* const a[8], int64_t acs, const float* b, int64_t brs, int64_t cols,
                     float* c, int64_t ldc, int64_t rows, bool add) {
    alignas(32) int32_t lanes[8];
    for (int j = 0; j < 8; ++j) lanes[j] = j < cols ? -1 : 0;
    const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    __m256 acc[8];
    for (int r = 0; r < 8; ++r) acc[r] = add && r < rows ? _mm256_maskload_ps(c + r * ldc, mask) : _mm256_setzero_ps();
    for (int64_t p = 0; p < k; ++p) {
        const __m256 bp = _mm256_maskload_ps(b + p * brs, mask);
        const int64_t o = p * acs;
        for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(a[r] + o), bp, acc[r]);
    }
    // A masked store is slow on AMD cores: a full row is stored whole, a
    // shorter one through a local copy.
    alignas(32) float row[8];
    for (int r = 0; r < rows; ++r) {
        if (cols == 8) {
            _mm256_storeu_ps(c + r * ldc, acc[r]);
            continue;
        }
        _mm256_store_ps(row, acc[r]);
        for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = row[j];
    }
}

// ---- the core's FMA rate (gemm_select.cpp) ---------------------------------------------------

double fma_rate_avx2(int64_t steps) {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s)
#pragma GCC unroll 12
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // A use of every accumulator, so that the compiler keeps the loop.
    volatile float sink = 0;
    for (int i = 0; i < 12; ++i) sink = sink + _mm256_cvtss_f32(acc[i]);
    return static_cast<double>(steps) * 12 * 8 / seconds;
}

// ---- the direct driver, for small products -----------------------------------------------

void gemm_direct_rows_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool add,
                           int64_t row_begin, int64_t row_end) {
    const int64_t k = a.cols;
    alignas(32) int32_t lanes[16];
    alignas(32) float local[6 * 16];
    for (int64_t j0 = 0; j0 < c.cols; j0 += 16) {
        const int64_t cols = c.cols - j0 < 16 ? c.cols - j0 : 16;
        if (cols <= kEdgeCols) {
            const int64_t rows = row_end - row_begin;
            edge_columns_avx2({a.data + row_begin * a.row_stride, rows, k, a.row_stride, a.col_stride}, b.data + j0,
                              b.row_stride, {c.data + row_begin * c.row_stride + j0, rows, cols, c.row_stride, 1}, add);
            continue;
        }
        if (cols <= 8) {
            for (int64_t i0 = row_begin; i0 < row_end; i0 += 8) {
                const int64_t rows = std::min<int64_t>(8, row_end - i0);
                const float* arow[8];
                clamped_rows<8>(a, i0, rows, 0, arow);
                tile_8x8(k, arow, a.col_stride, b.data + j0, b.row_stride, cols, c.data + i0 * c.row_stride + j0,
                         c.row_stride, rows, add);
            }
            continue;
        }
        for (int j = 0; j < 16; ++j) lanes[j] = j < cols ? -1 : 0;
        const __m256i m0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
        const __m256i m1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes + 8));
        for (int64_t i0 = row_begin; i0 < row_end; i0 += 6) {
            const int64_t rows = row_end - i0 < 6 ? row_end - i0 : 6;
            const float* arow[6];
            clamped_rows<6>(a, i0, rows, 0, arow);
            float* cij = c.data + i0 * c.row_stride + j0;
            if (rows == 6 && cols == 16) {
                tile_6x16<false>(k, arow, a.col_stride, b.data + j0, b.row_stride, m0, m1, cij, c.row_stride, add);
                continue;
            }
            if (cols == 16) { // the last 1 to 5 rows: a tile of that height
                using Tile =
                    void (*)(int64_t, const float* const[6], int64_t, const float*, int64_t, float*, int64_t, bool);
                static constexpr Tile kShort[5] = {tile_rows_x16<1>, tile_rows_x16<2>, tile_rows_x16<3>,
                                                   tile_rows_x16<4>, tile_rows_x16<5>};
                kShort[rows - 1](k, arow, a.col_stride, b.data + j0, b.row_stride, cij, c.row_stride, add);
                continue;
            }
            // A ragged right edge (9 to 15 columns): work in a local tile, copy the
            // valid part in and out.
            if (add)
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t j = 0; j < cols; ++j) local[r * 16 + j] = cij[r * c.row_stride + j];
            tile_6x16<true>(k, arow, a.col_stride, b.data + j0, b.row_stride, m0, m1, local, 16, add);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < cols; ++j) cij[r * c.row_stride + j] = local[r * 16 + j];
        }
    }
}


} // namespace ember::internal
