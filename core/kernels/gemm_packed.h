// Private to the gemm files: the packed SGEMM driver (gemm_packed_driver.h)
// and its micro-kernels in AVX2 (gemm_avx2.cpp), AVX-512 (gemm_avx512.cpp)
// and portable vector extensions (gemm_portable.cpp). gemm.cpp decides when
// to call them. Tests: tests/test_gemm.cpp, tests/test_gemm_portable.cpp.
#pragma once

#include <cstdint>
#include <functional>

#include "core/loops/parallel.h"
#include "core/ops/matmul.h"

namespace ember::internal {

// Pointers to N rows of A from row i0, column j0, of which only `rows`
// exist: past the last, the last again, so that a kernel working on N rows
// at a time computes the extra ones from valid memory, and their results are
// dropped.
template <int N>
void clamped_rows(MatrixRef<const float> a, int64_t i0, int64_t rows, int64_t j0, const float* out[N]) {
    for (int64_t r = 0; r < N; ++r) out[r] = &a.at(i0 + (r < rows ? r : rows - 1), j0);
}

// c (6 x 16, row stride ldc) = (add ? c : 0) + a @ b over kc steps: row i
// of A at a[i], its elements acs apart; b packed as kc rows of 16 floats.
void kernel_6x16_avx2(int64_t kc, const float* const a[6], int64_t acs, const float* b, float* c, int64_t ldc,
                      bool add);

// The columns of C at most this wide at its right edge go to
// edge_columns_avx2, not to the 6x16 tile.
inline constexpr int64_t kEdgeCols = 4;
// c (at most kEdgeCols columns) = (add ? c : 0) + a @ b, b's rows brs apart
// and contiguous: C's thin right edge, rows of A in the lanes of a vector.
// The same bits as the 6x16 tile.
void edge_columns_avx2(MatrixRef<const float> a, const float* b, int64_t brs, MatrixRef<float> c, bool add);

// out (b.rows x b.cols, row-major) = b: the direct driver's copy of a B
// whose rows are not contiguous, by 8x8 transposes when B is a transposed
// matrix (row stride 1).
void copy_rows_avx2(MatrixRef<const float> b, float* out);

// One full panel of A for the packed driver: rows [i0, i0 + 6), columns
// [p0, p0 + kc), as out[p*6 + i]; the _14 form packs 14 rows, as
// out[p*14 + i]. A's rows or its columns must be contiguous.
void pack_a_panel_avx2(MatrixRef<const float> a, int64_t i0, int64_t p0, int64_t kc, float* out);
void pack_a_panel_14_avx2(MatrixRef<const float> a, int64_t i0, int64_t p0, int64_t kc, float* out);
// 16 columns of a panel of a B whose columns are contiguous (row stride 1,
// such as W^T or k^T): rows [p0, p0 + kc), columns [j0, j0 + 16), as
// out[p*ldo + j] (ldo 16 for the AVX2 panel, 32 for half an AVX-512 one).
void pack_b_panel_transposed_avx2(MatrixRef<const float> b, int64_t p0, int64_t kc, int64_t j0, float* out,
                                  int64_t ldo);

// c (14 x 32, row stride ldc) = (add ? c : 0) + a @ b over kc steps, in
// AVX-512 (gemm_avx512.cpp): row i of A at a[i], its elements acs apart; b
// packed as kc rows of 32 floats. The same bits as kernel_6x16_avx2.
void kernel_14x32_avx512(int64_t kc, const float* const a[14], int64_t acs, const float* b, float* c, int64_t ldc,
                         bool add);

// The same as gemm_direct_rows_avx2 in AVX-512 (gemm_avx512.cpp), tiles of
// kDirectRowsAvx512 rows by 32 columns, masked at C's right edge: the same bits.
inline constexpr int kDirectRowsAvx512 = 12;
void gemm_direct_rows_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool add,
                             int64_t row_begin, int64_t row_end);

// Rows [row_begin, row_end) of c = a @ b (+ c when add), without packing:
// A read through its strides, B and C row by row (b.col_stride and
// c.col_stride must be 1). For products too small to repay packing.
void gemm_direct_rows_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool add,
                           int64_t row_begin, int64_t row_end);
// c = a @ b (+ c when accumulate) with gemm_direct_rows_avx2 (or _avx512),
// copying B first when its rows are not contiguous; c.col_stride must be 1.
void gemm_direct_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm_direct_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
// Fused multiply-adds per second that one thread issues with nothing else
// to do: 12 (AVX2) or 24 (AVX-512) independent accumulators, `steps` rounds
// of one FMA each, counting each 8 or 16 lanes. gemm_select.cpp compares
// the two to learn whether this core runs 512-bit instructions at full width.
double fma_rate_avx2(int64_t steps);
double fma_rate_avx512(int64_t steps);
// c = a @ b (+ c when accumulate) with packing and the 6x16 AVX2 tile, or
// the 14x32 AVX-512 one. Both give the same bits.
void gemm_packed_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm_packed_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
// The same always shared as one team of threads, never cut in two halves
// (Note [Two halves or one team] in gemm_packed_driver.h), and how many
// products the two above have cut in halves since the program started:
// for the tests, which compare the two ways and check that both ran.
void gemm_packed_team_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm_packed_team_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
int64_t gemm_packed_halves_run();
// The rows of C piece by piece, B packed once, for a thread that shares a
// product's rows with another by taking work from its end:
// next(rows) gives the next rows of C to compute, false when there are
// none (gemm_packed_pieces in gemm_packed_driver.h). k > 0.
// Pieces of a whole number of the tile's rows run fastest: kAvx2TileRows,
// kAvx512TileRows, gemm_portable_tile_rows().
using RowPieces = std::function<bool(WorkRange::Range&)>;
inline constexpr int64_t kAvx2TileRows = 6, kAvx512TileRows = 14;
// The most floats of B (padded to whole panels) that products in pieces
// pack: 4 MB per thread, a block of the team's.
inline constexpr int64_t kPiecesFloats = int64_t{1} << 20;
void gemm_pieces_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                      const RowPieces& next);
void gemm_pieces_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                        const RowPieces& next);
int64_t gemm_packed_column_halves_run(); // of those, the ones cut by columns
// The same with the portable tile (gemm_portable.cpp; 8 x 12 on arm64, 6 x
// 16 on x86-64): the same bits as the scalar loop c = std::fma(a_ip, b_pj,
// c) in increasing p, and as the tiles above. Built on every CPU; on x86-64
// for AVX and FMA, so call it there only where cpu_has_avx_fma().
void gemm_packed_portable(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
// The same as one team, and the products it cut in halves (as above).
void gemm_packed_team_portable(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
int64_t gemm_portable_halves_run();
int64_t gemm_portable_tile_rows();
void gemm_pieces_portable(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                          const RowPieces& next);

} // namespace ember::internal
