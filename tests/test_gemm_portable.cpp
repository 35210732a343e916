// The portable tile of the matrix products (core/kernels/gemm_portable.cpp)
// against a scalar std::fma loop in increasing k, bit for bit: awkward
// shapes, K deeper than a block, C wider than a block, transposed and
// strided operands, a strided C, both accumulate modes, 1 and 2 threads;
// through gemm's dispatch; and, where the CPU has AVX2, against the AVX2
// tile. Built wherever the fast kernels are, arm64 included (.ci/arm64 runs
// it under qemu), where it checks the tile in NEON.
#include <cmath>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "check.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/gemm.h"
#include "core/kernels/gemm_packed.h"
#include "core/tensor/platform.h"
#include "gemm_cases.h"

using namespace ember;
using namespace ember::testing;
using namespace ember::internal;

namespace {

// The reference: each element of C from its start value (0, or C's own
// when accumulating), then one fused multiply-add per k, in increasing k
// (fma_float: std::fmaf, whose MinGW-w64 copy rounds wrongly; core/tensor/platform.h).
void gemm_fma_loop(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t j = 0; j < c.cols; ++j) {
            float sum = accumulate ? c.at(i, j) : 0.0f;
            for (int64_t p = 0; p < a.cols; ++p) sum = fma_float(a.at(i, p), b.at(p, j), sum);
            c.at(i, j) = sum;
        }
}

// On x86-64 the tile is built for AVX and FMA: skipped on a CPU without them.
bool portable_tile_runs_here() {
    if constexpr (kX86Tiles) return cpu_has_avx_fma();
    return true;
}

// Elements of `actual` that differ from `expected` in any bit.
int64_t differing(const std::vector<float>& actual, const std::vector<float>& expected) {
    int64_t n = 0;
    for (size_t i = 0; i < actual.size(); ++i) n += std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0;
    return n;
}

// Beside the awkward shapes: K over several blocks of 256, C more than 8
// panels wide (A packed, not read in place), wider than a block of 4096
// columns, and tall.
std::vector<Shape3> portable_shapes() {
    std::vector<Shape3> shapes = kAwkwardShapes;
    shapes.insert(shapes.end(), {{29, 513, 301}, {20, 300, 4100}, {300, 600, 70}, {130, 40, 200}, {97, 257, 13}});
    return shapes;
}

} // namespace

TEST_CASE("the portable tile gives a scalar fma loop's bits", "[kernels][gemm]") {
    if (!portable_tile_runs_here()) {
        WARN("skipped: the portable tile does not run here (no AVX and FMA)");
        return;
    }
    for_each_case<float>(portable_shapes(), 31, [](const Shape3& s, auto ma, auto mb, bool accumulate) {
        std::vector<float> tile(s.m * s.n, 0.25f), loop(s.m * s.n, 0.25f), strided(s.m * s.n, 0.25f);
        gemm_packed_portable(ma, mb, MatrixRef<float>{tile.data(), s.m, s.n, s.n, 1}, accumulate);
        gemm_fma_loop(ma, mb, MatrixRef<float>{loop.data(), s.m, s.n, s.n, 1}, accumulate);
        REQUIRE(differing(tile, loop) == 0);
        // C stored transposed (column stride m): every tile goes through the local copy.
        gemm_packed_portable(ma, mb, MatrixRef<float>{strided.data(), s.m, s.n, 1, s.m}, accumulate);
        std::vector<float> back(s.m * s.n);
        for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) back[i * s.n + j] = strided[j * s.m + i];
        REQUIRE(differing(back, loop) == 0);
    });
}

TEST_CASE("the portable tile on operands with neither dim contiguous, at 1 and 2 threads", "[kernels][gemm]") {
    if (!portable_tile_runs_here()) {
        WARN("skipped: the portable tile does not run here (no AVX and FMA)");
        return;
    }
    // A is every other column of a (m, 2k) matrix, B every other row and
    // column of a (2k, 2n) one, C a block of a wider matrix (row stride n + 5):
    // the packing falls back to its element-wise copy.
    for (const Shape3& s : std::vector<Shape3>{{37, 300, 29}, {50, 70, 140}, {5, 9, 300}}) {
        std::vector<float> a = pattern_values(s.m * 2 * s.k, 41), b = pattern_values(4 * s.k * s.n, 42);
        MatrixRef<const float> ma{a.data(), s.m, s.k, 2 * s.k, 2};
        MatrixRef<const float> mb{b.data(), s.k, s.n, 4 * s.n, 2};
        for (bool accumulate : {false, true}) {
            const int64_t ldc = s.n + 5;
            std::vector<float> loop(s.m * ldc, -0.5f);
            gemm_fma_loop(ma, mb, MatrixRef<float>{loop.data(), s.m, s.n, ldc, 1}, accumulate);
            for (int threads : {1, 2}) {
                INFO(s.m << "x" << s.k << "x" << s.n << ", " << threads << " threads, accumulate " << accumulate);
                const int before = get_num_threads();
                set_num_threads(threads);
                std::vector<float> tile(s.m * ldc, -0.5f);
                gemm_packed_portable(ma, mb, MatrixRef<float>{tile.data(), s.m, s.n, ldc, 1}, accumulate);
                set_num_threads(before);
                REQUIRE(differing(tile, loop) == 0); // the padding between rows untouched too
            }
        }
    }
}

TEST_CASE("the portable tile gives one thread's bits on two threads, in halves and as a team", "[kernels][gemm]") {
    if (!portable_tile_runs_here()) {
        WARN("skipped: the portable tile does not run here (no AVX and FMA)");
        return;
    }
    // Note [Two halves or one team] (core/kernels/gemm_packed_driver.h):
    // two threads cut 771 x 100 by rows and 30 x 260 by columns (with 6 x 16
    // and 8 x 12 tiles alike), and 66 x 100 by rows with 6 x 16 tiles (7
    // column panels are too few) or by columns with 8 x 12; the team entry
    // point shares the tiles of all three instead.
    for (const Shape3& s : std::vector<Shape3>{{771, 64, 100}, {30, 300, 260}, {66, 300, 100}}) {
        std::vector<float> a = pattern_values(s.m * s.k, 61), b = pattern_values(s.k * s.n, 62);
        MatrixRef<const float> ma{a.data(), s.m, s.k, s.k, 1}, mb{b.data(), s.k, s.n, s.n, 1};
        std::vector<float> loop(s.m * s.n, 0.25f), halves(s.m * s.n, 0.25f), team(s.m * s.n, 0.25f);
        gemm_fma_loop(ma, mb, MatrixRef<float>{loop.data(), s.m, s.n, s.n, 1}, true);
        const int before = get_num_threads();
        set_num_threads(2);
        const int64_t cut = gemm_portable_halves_run();
        gemm_packed_portable(ma, mb, MatrixRef<float>{halves.data(), s.m, s.n, s.n, 1}, true);
        const int64_t cut_after = gemm_portable_halves_run();
        gemm_packed_team_portable(ma, mb, MatrixRef<float>{team.data(), s.m, s.n, s.n, 1}, true);
        const int64_t cut_team = gemm_portable_halves_run();
        set_num_threads(before);
        INFO(s.m << "x" << s.k << "x" << s.n);
        REQUIRE(differing(halves, loop) == 0);
        REQUIRE(differing(team, loop) == 0);
        REQUIRE(cut_after == cut + 1);
        REQUIRE(cut_team == cut_after);
    }
}

TEST_CASE("the exactness test can tell a fused kernel from an unfused one", "[kernels][gemm]") {
    // The fma loop and gemm's definition (a multiply and an add, each
    // rounded) must differ on these inputs, or the tests above could not
    // catch a tile that forgot to fuse.
    const Shape3 s{40, 300, 50};
    std::vector<float> a = pattern_values(s.m * s.k, 51), b = pattern_values(s.k * s.n, 52);
    MatrixRef<const float> ma{a.data(), s.m, s.k, s.k, 1}, mb{b.data(), s.k, s.n, s.n, 1};
    std::vector<float> fused(s.m * s.n), plain(s.m * s.n);
    gemm_fma_loop(ma, mb, MatrixRef<float>{fused.data(), s.m, s.n, s.n, 1}, false);
    gemm_plain(ma, mb, MatrixRef<float>{plain.data(), s.m, s.n, s.n, 1}, false);
    INFO(differing(fused, plain) << " of " << fused.size() << " elements differ");
    REQUIRE(differing(fused, plain) > static_cast<int64_t>(fused.size()) / 2);
}

TEST_CASE("gemm runs the portable tile where it is picked, with the same bits", "[kernels][gemm]") {
    if (!portable_tile_runs_here()) {
        WARN("skipped: the portable tile does not run here (no AVX and FMA)");
        return;
    }
    // On x86-64 the guard forces the tile (the AVX2 tiles run otherwise); on
    // other CPUs it is gemm's own choice. A of more than kDotRows rows: a
    // few rows times a transposed B take the dot products instead.
    GemmTileGuard portable(GemmTile::kPortable);
    REQUIRE(gemm_uses_portable());
    REQUIRE_FALSE(gemm_uses_avx2());
    for_each_case<float>({{5, 7, 3}, {64, 64, 64}, {70, 300, 130}}, 61,
                         [](const Shape3& s, auto ma, auto mb, bool accumulate) {
                             std::vector<float> c(s.m * s.n, 1.5f), loop(s.m * s.n, 1.5f);
                             gemm(ma, mb, MatrixRef<float>{c.data(), s.m, s.n, s.n, 1}, accumulate);
                             gemm_fma_loop(ma, mb, MatrixRef<float>{loop.data(), s.m, s.n, s.n, 1}, accumulate);
                             REQUIRE(differing(c, loop) == 0);
                         });
}

TEST_CASE("the portable tile gives the AVX2 tile's bits", "[kernels][gemm]") {
    if (!kX86Tiles || !cpu_has_avx2_fma()) {
        WARN("skipped: no AVX2 tile here");
        return;
    }
    for_each_case<float>(
        {{13, 17, 19}, {97, 300, 31}, {29, 513, 301}, {65, 65, 65}}, 71,
        [](const Shape3& s, auto ma, auto mb, bool accumulate) {
            std::vector<float> portable(s.m * s.n, 0.75f), avx2(s.m * s.n, 0.75f);
            gemm_packed_portable(ma, mb, MatrixRef<float>{portable.data(), s.m, s.n, s.n, 1}, accumulate);
            if constexpr (kX86Tiles)
                gemm_packed_avx2(ma, mb, MatrixRef<float>{avx2.data(), s.m, s.n, s.n, 1}, accumulate);
            REQUIRE(differing(portable, avx2) == 0);
        });
}

TEST_CASE("the portable tile piece by piece gives the bits of the whole product", "[kernels][gemm]") {
    if (!portable_tile_runs_here()) {
        WARN("skipped: the portable tile does not run here (no AVX and FMA)");
        return;
    }
    // gemm_pieces_portable (gemm_packed_pieces in gemm_packed_driver.h): C's
    // rows out of order and in odd pieces (a partial tile, one row, ...),
    // B packed once; k's last block short (300 = 256 + 44), and 4100
    // columns (two blocks of columns). tests/test_gemm.cpp has the x86 tiles'.
    for (const Shape3& s : std::vector<Shape3>{{100, 300, 65}, {40, 130, 4100}}) {
        std::vector<float> a = pattern_values(s.m * s.k, 63), b = pattern_values(s.k * s.n, 64);
        MatrixRef<const float> ma{a.data(), s.m, s.k, s.k, 1}, mb{b.data(), s.k, s.n, s.n, 1};
        std::vector<float> loop(s.m * s.n, 0.25f), pieces(s.m * s.n, 0.25f);
        gemm_fma_loop(ma, mb, MatrixRef<float>{loop.data(), s.m, s.n, s.n, 1}, true);
        const std::vector<WorkRange::Range> order = {{s.m - 7, s.m}, {0, 6}, {13, 14}, {6, 13}, {14, s.m - 7}};
        size_t next = 0;
        gemm_pieces_portable(ma, mb, MatrixRef<float>{pieces.data(), s.m, s.n, s.n, 1}, true,
                             [&](WorkRange::Range& rows) {
                                 if (next == order.size()) return false;
                                 rows = order[next++];
                                 return true;
                             });
        INFO(s.m << "x" << s.k << "x" << s.n);
        REQUIRE(next == order.size());
        REQUIRE(differing(pieces, loop) == 0);
    }
}
