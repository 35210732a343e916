// The fast matrix kernels of core/kernels/gemm*.cpp against gemm's
// definition, gemm_plain (core/ops/matmul.cpp), on awkward shapes and every
// layout: the portable blocked kernel gives its bits; the AVX2 and AVX-512
// kernels, which fuse each multiply-add, stay within the rounding that
// fusing allows, and give each other's bits whichever driver and tile runs.
// Built only with the fast kernels on x86-64 (tests/meson.build); the
// portable tile, on every CPU: tests/test_gemm_portable.cpp; the split of
// batched products between threads: tests/test_kernels.cpp.
#include <cmath>
#include <functional>

#include <catch2/catch.hpp>

#include "check.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/gemm.h"
#include "core/kernels/gemm_packed.h"
#include "gemm_cases.h"

using namespace ember;
using namespace ember::testing;
using namespace ember::internal;

namespace {

template <typename T>
using Kernel = void (*)(MatrixRef<const T>, MatrixRef<const T>, MatrixRef<T>, bool);

// Runs `kernel` and gemm_plain on every case; `check` compares the results.
template <typename T>
void compare_with_plain(Kernel<T> kernel,
                        const std::function<void(const std::vector<T>&, const std::vector<T>&, int64_t)>& check) {
    for_each_case<T>(kAwkwardShapes, 1, [&](const Shape3& s, auto ma, auto mb, bool accumulate) {
        std::vector<T> c(s.m * s.n, T(0.5)), plain(s.m * s.n, T(0.5));
        kernel(ma, mb, MatrixRef<T>{c.data(), s.m, s.n, s.n, 1}, accumulate);
        gemm_plain(ma, mb, MatrixRef<T>{plain.data(), s.m, s.n, s.n, 1}, accumulate);
        check(c, plain, s.k);
    });
}

// The awkward shapes, and C panels whose last rows take the direct drivers'
// shorter tiles: 2 to 5 rows left of AVX2's 6 (16 = 6 + 6 + 4 is a strip
// of attention's scores), 1 to 4 and 5 to 8 left of AVX-512's 12, under 16
// and 32 columns.
const std::vector<Shape3> kDirectShapes = [] {
    std::vector<Shape3> shapes = kAwkwardShapes;
    shapes.insert(shapes.end(), {{16, 32, 48}, {14, 24, 32}, {15, 9, 16}, {20, 16, 64}, {11, 5, 80}});
    return shapes;
}();

// C's start values for a product of shape s (m x n, row-major), all
// different, so that accumulating into the wrong row or column shows; and
// the same values laid out transposed (column stride m).
std::vector<float> start_of_c(const Shape3& s) { return pattern_values(s.m * s.n, 77); }
std::vector<float> start_of_c_transposed(const Shape3& s) {
    const std::vector<float> c = start_of_c(s);
    std::vector<float> t(c.size());
    for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) t[j * s.m + i] = c[i * s.n + j];
    return t;
}

} // namespace

// The portable kernel sums each element in increasing k from its start
// value, rounding after every multiply and add, exactly like gemm_plain;
// only the order in which elements are visited differs.
TEST_CASE("the portable blocked kernel gives gemm's definition bit for bit", "[kernels][gemm]") {
    compare_with_plain<float>(gemm_blocked, [](const auto& c, const auto& plain, int64_t) { REQUIRE(c == plain); });
}

TEST_CASE("float64 products give gemm's definition bit for bit", "[kernels][gemm]") {
    compare_with_plain<double>(fast::gemm, [](const auto& c, const auto& plain, int64_t) { REQUIRE(c == plain); });
}

TEST_CASE("the AVX2 kernels agree with gemm's definition within rounding error", "[kernels][gemm]") {
    if (!gemm_uses_avx2()) {
        WARN("skipped: the AVX2 kernel does not run here (no AVX2/FMA)");
        return;
    }
    // The kernels fuse each multiply-add, so each of the k steps can differ
    // from gemm_plain's by half an ulp of the running sum: about k * 2^-24 * max|sum| at most.
    // The pattern's entries are in [-1, 1), so |sums| <= k + 0.5.
    compare_with_plain<float>(fast::gemm, [](const auto& c, const auto& ref, int64_t k) {
        double bound = static_cast<double>(k + 1) * static_cast<double>(k + 1) * 0x1p-24 + 1e-6;
        double worst = 0;
        for (size_t i = 0; i < c.size(); ++i) worst = std::max(worst, std::abs(double(c[i]) - double(ref[i])));
        INFO("largest difference " << worst << ", bound " << bound);
        REQUIRE(worst <= bound);
    });
}

TEST_CASE("the AVX2 direct and packed kernels give identical bits", "[kernels][gemm]") {
    if (!gemm_uses_avx2()) {
        WARN("skipped: the AVX2 kernels do not run here (no AVX2/FMA)");
        return;
    }
    // gemm picks the direct kernel for small products and packing for large
    // ones; both run one fused multiply-add per k in increasing order, so the
    // choice must never change a result. Also through a C with strided columns.
    for_each_case<float>(kDirectShapes, 11, [](const Shape3& s, auto ma, auto mb, bool accumulate) {
        std::vector<float> direct = start_of_c(s), packed = start_of_c(s), strided = start_of_c_transposed(s);
        gemm_direct_avx2(ma, mb, MatrixRef<float>{direct.data(), s.m, s.n, s.n, 1}, accumulate);
        gemm_packed_avx2(ma, mb, MatrixRef<float>{packed.data(), s.m, s.n, s.n, 1}, accumulate);
        REQUIRE(direct == packed);
        // C stored transposed (column stride m): gemm must take the packed path
        // (but for A of at most kDotRows rows, whose dot products sum in another order).
        if (s.m <= kDotRows) return;
        gemm(ma, mb, MatrixRef<float>{strided.data(), s.m, s.n, 1, s.m}, accumulate);
        for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) REQUIRE(strided[j * s.m + i] == packed[i * s.n + j]);
    });
}

TEST_CASE("the AVX-512 tiles give the AVX2 tiles' bits", "[kernels][gemm]") {
    if (!gemm_uses_avx2() || !cpu_has_avx512f()) {
        WARN("skipped: the AVX-512 kernel does not run here (no AVX-512F)");
        return;
    }
    // Both tiles run one fused multiply-add per k, in increasing k, from C's
    // start value: the same bits on every shape, layout and edge, whichever
    // of the two the dispatch picks (gemm_uses_avx512). Larger shapes too:
    // several k blocks, partial 14-row and 32-column panels, wide C.
    std::vector<Shape3> shapes = kDirectShapes;
    shapes.insert(shapes.end(), {{300, 600, 70}, {29, 513, 301}, {130, 257, 4100}, {15, 40, 33}});
    for_each_case<float>(shapes, 21, [](const Shape3& s, auto ma, auto mb, bool accumulate) {
        std::vector<float> avx2 = start_of_c(s), avx512 = start_of_c(s), strided = start_of_c_transposed(s);
        gemm_packed_avx2(ma, mb, MatrixRef<float>{avx2.data(), s.m, s.n, s.n, 1}, accumulate);
        gemm_packed_avx512(ma, mb, MatrixRef<float>{avx512.data(), s.m, s.n, s.n, 1}, accumulate);
        int64_t differ = 0;
        for (size_t i = 0; i < avx2.size(); ++i) differ += avx512[i] != avx2[i];
        REQUIRE(differ == 0);
        gemm_packed_avx512(ma, mb, MatrixRef<float>{strided.data(), s.m, s.n, 1, s.m}, accumulate);
        // C stored transposed: the edge tiles go through the local tile.
        for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) differ += strided[j * s.m + i] != avx2[i * s.n + j];
        REQUIRE(differ == 0);
        // The direct drivers (no packing; masked 32-column tiles in AVX-512).
        std::vector<float> direct2 = start_of_c(s), direct512 = start_of_c(s);
        gemm_direct_avx2(ma, mb, MatrixRef<float>{direct2.data(), s.m, s.n, s.n, 1}, accumulate);
        gemm_direct_avx512(ma, mb, MatrixRef<float>{direct512.data(), s.m, s.n, s.n, 1}, accumulate);
        for (size_t i = 0; i < avx2.size(); ++i) differ += (direct2[i] != avx2[i]) + (direct512[i] != avx2[i]);
        REQUIRE(differ == 0);
    });
    INFO("the dispatch picked " << (gemm_uses_avx512() ? "AVX-512" : "AVX2") << " on this CPU");
    SUCCEED();
}

TEST_CASE("AVX-512 kernels run only on cores that run 512-bit FMAs at full width", "[kernels][gemm]") {
    // The rule on rates: AVX-512 at least 1.5 times AVX2's multiply-adds per
    // second. Zen 5 or an Intel server core issues about twice; Zen 4, which
    // splits each 512-bit instruction in two, about the same.
    CHECK(avx512_full_width(2.0e11, 1.0e11));
    CHECK(avx512_full_width(1.5e11, 1.0e11));
    CHECK_FALSE(avx512_full_width(1.49e11, 1.0e11));
    CHECK_FALSE(avx512_full_width(1.0e11, 1.0e11));
    CHECK_FALSE(avx512_full_width(0.5e11, 1.0e11));
    if (!gemm_uses_avx2()) {
        WARN("skipped the rest: the AVX2 kernels do not run here (no AVX2/FMA)");
        return;
    }
    if (!cpu_has_avx512f()) {
        CHECK_FALSE(cpu_runs_avx512_full_width());
        CHECK_FALSE(gemm_uses_avx512());
        CHECK_FALSE(gemm_direct_uses_avx512());
        return;
    }
    // The dispatch follows the measured rule (no timing is asserted here):
    // a half-width core never runs AVX-512 unless forced to.
    INFO("multiply-adds per second: AVX2 " << fma_rate_avx2(20000) << ", AVX-512 " << fma_rate_avx512(10000));
    const bool full = cpu_runs_avx512_full_width();
    if (!full) {
        CHECK_FALSE(gemm_uses_avx512());
        CHECK_FALSE(gemm_direct_uses_avx512());
        GemmTileGuard forced(GemmTile::kAvx512);
        CHECK(gemm_uses_avx512());
        CHECK(gemm_direct_uses_avx512());
    }
}

TEST_CASE("the packed kernels give one thread's bits when two threads share the tiles", "[kernels][gemm]") {
    if (!gemm_uses_avx2()) {
        WARN("skipped: the AVX2 kernels do not run here (no AVX2/FMA)");
        return;
    }
    // Two ways to share a product (Note [Two halves or one team] in
    // core/kernels/gemm_packed_driver.h), each against one thread.
    // As one team (the *_team entry points), threads take equal runs of C's
    // tiles, row panel by row panel, so a run can end or start inside a row
    // panel: 70 x 100 in AVX-512's 14 x 32 tiles is 20 tiles, 10 each, the
    // first run two whole row panels and half of the third, the second the
    // rest of it and two more; 66 x 100 does the same in AVX2's 6 x 16 (77
    // tiles, 39 + 38); 10 x 300 is one row panel, split inside it; 20 x 4100
    // is two blocks of columns, the threads meeting at a barrier between
    // them, the last block 4 columns wide and so read at another depth.
    // Cut in halves (the plain entry points on two threads; `cut` below
    // lists the shapes both tiles cut): by rows, 771 x 100 (771 is no
    // multiple of a tile's rows) and lm_head's 768 x 65, its last panel of
    // 1 column with a kernel of its own; by columns, 20 x 4100 (its last 4
    // columns run that kernel alone but the tile in the second half) and
    // 30 x 260 (the second half 8 of AVX2's panels or 4 of AVX-512's, A read
    // in place, its last 4 columns the thin kernel's); and 300 x 130, cut
    // by rows although half its columns would let A be read in place (Note
    // [Two halves or one team] says why). Each tile is computed the same
    // whoever computes it: the bits of one thread. (Two threads,
    // not more: libomp keeps what it allocates for each thread it adds,
    // which LeakSanitizer reports in CI's sanitize build.)
    struct Way {
        const char* name;
        Kernel<float> kernel;
        bool team; // a *_team entry point, which never cuts
    };
    std::vector<Way> kernels = {{"AVX2", gemm_packed_avx2, false}, {"AVX2 team", gemm_packed_team_avx2, true}};
    if (cpu_has_avx512f()) {
        kernels.push_back({"AVX-512", gemm_packed_avx512, false});
        kernels.push_back({"AVX-512 team", gemm_packed_team_avx512, true});
    }
    const std::vector<Shape3> shapes = {{70, 300, 100}, {66, 300, 100}, {10, 300, 300}, {20, 600, 4100},
                                        {771, 64, 100}, {30, 300, 260}, {768, 128, 65}, {65, 768, 128},
                                        {29, 513, 301}, {1, 270000, 2}, {300, 64, 130}};
    const auto cut = [](const Shape3& s) {
        return (s.m == 771 && s.n == 100) || (s.m == 768 && s.n == 65) || s.n == 4100 || (s.m == 30 && s.n == 260) ||
               (s.m == 300 && s.n == 130);
    };
    const auto by_columns = [](const Shape3& s) { return s.n == 4100 || (s.m == 30 && s.n == 260); };
    for_each_case<float>(shapes, 31, [&](const Shape3& s, auto ma, auto mb, bool accumulate) {
        const int before = get_num_threads();
        for (const auto& [name, kernel, team] : kernels) {
            INFO(name << ", accumulate " << accumulate);
            set_num_threads(1);
            std::vector<float> one = start_of_c(s), two = start_of_c(s), nested = start_of_c(s);
            kernel(ma, mb, MatrixRef<float>{one.data(), s.m, s.n, s.n, 1}, accumulate);
            set_num_threads(2);
            const int64_t halves = gemm_packed_halves_run(), columns = gemm_packed_column_halves_run();
            kernel(ma, mb, MatrixRef<float>{two.data(), s.m, s.n, s.n, 1}, accumulate);
            const int64_t halves_now = gemm_packed_halves_run(), columns_now = gemm_packed_column_halves_run();
            // Inside a parallel loop the product cannot split again: all of it on one thread.
            const Kernel<float> run = kernel; // (clang 14 cannot capture a structured binding)
            parallel_for(0, 2, 1, [&](int64_t b, int64_t) {
                if (b == 0) run(ma, mb, MatrixRef<float>{nested.data(), s.m, s.n, s.n, 1}, accumulate);
            });
            const int64_t halves_nested = gemm_packed_halves_run() - halves_now;
            set_num_threads(before); // before REQUIRE, which ends the case when it fails
            REQUIRE(two == one);
            REQUIRE(nested == one);
            if (team) REQUIRE(halves_now == halves);
            if (!team && cut(s)) REQUIRE(halves_now == halves + 1);
            if (!team && cut(s)) REQUIRE(columns_now == columns + (by_columns(s) ? 1 : 0));
            REQUIRE(halves_nested == 0);
        }
    });
}

TEST_CASE("the packed products piece by piece give the bits of one thread, whatever the pieces", "[gemm]") {
    if (!gemm_uses_avx2()) {
        WARN("skipped: the AVX2 kernel does not run here (no AVX2/FMA)");
        return;
    }
    // gemm_pieces_* (gemm_packed_pieces in gemm_packed_driver.h): all of B
    // packed once, then C's rows in the pieces next() hands out, as two
    // threads taking work from each other's end hand them out (Note [Taking
    // work from the other end]). Here the pieces come out of order and of
    // odd sizes: the last rows (a partial tile), one tile, one row, part of
    // a tile, the rest. Shapes: k's last block short (384 = 256 + 128, in
    // AVX2's and the in-place blocks of 256; 600 = 512 + 88, in AVX-512's),
    // C 65 columns wide (A read in place, the thin kernel at its edge), 300
    // (A packed), and 4100 (two blocks of columns).
    using Pieces = void (*)(MatrixRef<const float>, MatrixRef<const float>, MatrixRef<float>, bool, const RowPieces&);
    struct Way {
        const char* name;
        Kernel<float> whole;
        Pieces pieces;
    };
    // (The portable tile's pieces: tests/test_gemm_portable.cpp.)
    std::vector<Way> ways = {{"AVX2", gemm_packed_avx2, gemm_pieces_avx2}};
    if (cpu_has_avx512f()) ways.push_back({"AVX-512", gemm_packed_avx512, gemm_pieces_avx512});
    const std::vector<Shape3> shapes = {{100, 384, 65}, {97, 600, 300}, {40, 130, 4100}};
    for_each_case<float>(shapes, 43, [&](const Shape3& s, auto ma, auto mb, bool accumulate) {
        const std::vector<WorkRange::Range> order = {{s.m - 7, s.m}, {0, 6}, {13, 14}, {6, 13}, {14, s.m - 7}};
        const int before = get_num_threads();
        for (const Way& way : ways) {
            INFO(way.name << ", accumulate " << accumulate);
            set_num_threads(1);
            std::vector<float> one = start_of_c(s), pieces = start_of_c(s);
            way.whole(ma, mb, MatrixRef<float>{one.data(), s.m, s.n, s.n, 1}, accumulate);
            size_t next = 0;
            way.pieces(ma, mb, MatrixRef<float>{pieces.data(), s.m, s.n, s.n, 1}, accumulate,
                       [&](WorkRange::Range& rows) {
                           if (next == order.size()) return false;
                           rows = order[next++];
                           return true;
                       });
            set_num_threads(before); // before REQUIRE, which ends the case when it fails
            REQUIRE(next == order.size());
            REQUIRE(pieces == one);
        }
    });
}

TEST_CASE("a product in pieces whose next() runs another product in pieces keeps its own packed B", "[gemm]") {
    if (!gemm_uses_avx2()) {
        WARN("skipped: the AVX2 kernel does not run here (no AVX2/FMA)");
        return;
    }
    // A Linear's backward does this: between pieces of dx (W packed once
    // into the thread's scratch), a thread sums part of dW, a product that
    // may itself go in pieces on that thread (two threads, the loop outside
    // not split). The inner one (its B smaller: it would be packed into the
    // same scratch, over the outer one's) must not overwrite the outer one's.
    TwoThreads two;
    const Shape3 outer{60, 256, 200}, inner{120, 64, 48};
    std::vector<float> a = pattern_values(outer.m * outer.k, 51), b = pattern_values(outer.k * outer.n, 52);
    std::vector<float> ia = pattern_values(inner.m * inner.k, 53), ib = pattern_values(inner.k * inner.n, 54);
    const MatrixRef<const float> ma{a.data(), outer.m, outer.k, outer.k, 1}, mb{b.data(), outer.k, outer.n, outer.n, 1};
    const MatrixRef<const float> mia{ia.data(), inner.m, inner.k, inner.k, 1};
    const MatrixRef<const float> mib{ib.data(), inner.k, inner.n, inner.n, 1};
    std::vector<float> one(outer.m * outer.n), pieces(outer.m * outer.n), inner_c(inner.m * inner.n);
    std::vector<float> inner_one(inner.m * inner.n);
    set_num_threads(1);
    gemm_packed_avx2(ma, mb, MatrixRef<float>{one.data(), outer.m, outer.n, outer.n, 1}, false);
    gemm_packed_avx2(mia, mib, MatrixRef<float>{inner_one.data(), inner.m, inner.n, inner.n, 1}, false);
    set_num_threads(2);
    const int64_t halves = gemm_packed_halves_run();
    int64_t row = 0;
    gemm_pieces_avx2(
        ma, mb, MatrixRef<float>{pieces.data(), outer.m, outer.n, outer.n, 1}, false, [&](WorkRange::Range& rows) {
            if (row == outer.m) return false;
            gemm_packed_avx2(mia, mib, MatrixRef<float>{inner_c.data(), inner.m, inner.n, inner.n, 1}, false);
            rows = {row, row + 12};
            row += 12;
            return true;
        });
    const int64_t inner_halves = gemm_packed_halves_run() - halves;
    REQUIRE(inner_halves == outer.m / 12); // each inner product went in halves (and pieces), on two threads
    REQUIRE(inner_c == inner_one);
    REQUIRE(pieces == one);
}
