// The AVX2 and AVX-512 tiles in the packed SGEMM driver
// (gemm_packed_driver.h, which draws the loop nest): the 6x16 AVX2 tile
// (gemm_avx2.cpp) or the 14x32 AVX-512 one (gemm_avx512.cpp), and the
// direct driver for small products around the same tiles. Both tiles give
// the same bits. docs/matmul.md explains them; tests/test_gemm.cpp.
#include <algorithm>

#include "core/kernels/gemm_packed.h"
#include "core/kernels/gemm_packed_driver.h"
#include "core/loops/parallel.h"

namespace ember::internal {

namespace {

// The two register tiles the driver can run, with the packing each reads.
struct Avx2Tile {
    static constexpr int64_t kMr = 6, kNr = 16; // the micro-kernel's tile
    static constexpr int64_t kKc = 256;         // depth of a block
    static constexpr int64_t kMc = 96;          // rows of A per packed block: 96 x 256 floats = 96 KB (L2)
    static void kernel(int64_t kc, const float* const a[kMr], int64_t acs, const float* b, float* c, int64_t ldc,
                       bool add) {
        kernel_6x16_avx2(kc, a, acs, b, c, ldc, add);
    }
    static void pack_a_panel(MatrixRef<const float> a, int64_t i0, int64_t p0, int64_t kc, float* out) {
        pack_a_panel_avx2(a, i0, p0, kc, out);
    }
    static void pack_b_panel_transposed(MatrixRef<const float> b, int64_t p0, int64_t kc, int64_t j0, float* out) {
        pack_b_panel_transposed_avx2(b, p0, kc, j0, out, kNr);
    }
    static constexpr bool kThinEdges = true;
    static void edge_columns(MatrixRef<const float> a, const float* b, int64_t brs, MatrixRef<float> c, bool add) {
        edge_columns_avx2(a, b, brs, c, add);
    }
};

struct Avx512Tile {
    static constexpr int64_t kMr = 14, kNr = 32;
    // Deeper blocks than the AVX2 tile's: each tile of C is loaded and
    // stored once per block, and at 14x32 that round trip costs more than
    // B's 64 KB panel streaming from L2 (docs/matmul.md, "Block sizes").
    static constexpr int64_t kKc = 512;
    static constexpr int64_t kMc = 112; // 112 x 512 floats = 224 KB (L2)
    static void kernel(int64_t kc, const float* const a[kMr], int64_t acs, const float* b, float* c, int64_t ldc,
                       bool add) {
        kernel_14x32_avx512(kc, a, acs, b, c, ldc, add);
    }
    static void pack_a_panel(MatrixRef<const float> a, int64_t i0, int64_t p0, int64_t kc, float* out) {
        pack_a_panel_14_avx2(a, i0, p0, kc, out);
    }
    static void pack_b_panel_transposed(MatrixRef<const float> b, int64_t p0, int64_t kc, int64_t j0, float* out) {
        pack_b_panel_transposed_avx2(b, p0, kc, j0, out, kNr);
        pack_b_panel_transposed_avx2(b, p0, kc, j0 + 16, out + 16, kNr);
    }
    static constexpr bool kThinEdges = true;
    static void edge_columns(MatrixRef<const float> a, const float* b, int64_t brs, MatrixRef<float> c, bool add) {
        edge_columns_avx2(a, b, brs, c, add);
    }
};

} // namespace

void gemm_packed_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    gemm_packed<Avx2Tile>(a, b, c, accumulate);
}

void gemm_packed_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    gemm_packed<Avx512Tile>(a, b, c, accumulate);
}

void gemm_packed_team_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    gemm_packed_team<Avx2Tile>(a, b, c, accumulate);
}

void gemm_packed_team_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    gemm_packed_team<Avx512Tile>(a, b, c, accumulate);
}

static_assert(Avx2Tile::kMr == kAvx2TileRows && Avx512Tile::kMr == kAvx512TileRows);

void gemm_pieces_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                      const RowPieces& next) {
    gemm_packed_pieces<Avx2Tile>(a, b, c, accumulate, next);
}

void gemm_pieces_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                        const RowPieces& next) {
    gemm_packed_pieces<Avx512Tile>(a, b, c, accumulate, next);
}

int64_t gemm_packed_halves_run() { return halves_run.load(std::memory_order_relaxed); }
int64_t gemm_packed_column_halves_run() { return column_halves_run.load(std::memory_order_relaxed); }

namespace {

// The direct driver: threads split C's rows in whole tiles of kMr rows,
// each running `rows` (gemm_direct_rows_avx2 or _avx512) on its share.
template <int64_t kMr, class Rows>
void gemm_direct(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                 const Rows& rows) {
    const int64_t m = c.rows, n = c.cols, k = a.cols;
    if (b.col_stride != 1) { // B's rows must be contiguous: copy it (k x n, small) once
        static thread_local Scratch b_scratch;
        float* bp = b_scratch.get(static_cast<size_t>(k * n));
        copy_rows_avx2(b, bp);
        b = MatrixRef<const float>{bp, k, n, n, 1};
    }
    const int64_t row_tiles = (m + kMr - 1) / kMr;
    const int64_t grain = grain_for(kMr * n * k, kGemmParallelWork);
    parallel_for(0, row_tiles, grain,
                 [&](int64_t begin, int64_t end) { rows(a, b, c, accumulate, begin * kMr, std::min(m, end * kMr)); });
}

} // namespace

void gemm_direct_avx2(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    gemm_direct<Avx2Tile::kMr>(a, b, c, accumulate, gemm_direct_rows_avx2); // tiles 6 rows high, as the packed one
}

void gemm_direct_avx512(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    gemm_direct<kDirectRowsAvx512>(a, b, c, accumulate, gemm_direct_rows_avx512);
}

} // namespace ember::internal
