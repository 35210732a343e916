// The fast matrix products behind fast::gemm (dispatch.h), private to
// core/kernels/ and its tests: which kernels this CPU runs, and the pieces
// other kernels and tests reach for. gemm.cpp picks a kernel for each
// product; docs/matmul.md explains them all. Tests: tests/test_kernels.cpp.
#pragma once

#include <cstdint>

#include "core/ops/matmul.h"

namespace ember::internal {

// True where this build has the AVX2 and AVX-512 tiles: on x86-64,
// meson.build compiles gemm_packed.cpp, gemm_avx2.cpp and gemm_avx512.cpp,
// and defines EMBER_X86_TILES. The portable tile (gemm_portable.cpp) and
// gemm_select.cpp are built on every CPU.
#ifdef EMBER_X86_TILES
inline constexpr bool kX86Tiles = true;
#else
inline constexpr bool kX86Tiles = false;
#endif

// ---- gemm_select.cpp: which kernels run -------------------------------------

// True when this CPU (checked once, at run time) has AVX2 and FMA; AVX-512F;
// AVX and FMA (what the portable tile is built for on x86-64). Always false
// on other CPUs.
bool cpu_has_avx2_fma();
bool cpu_has_avx512f();
bool cpu_has_avx_fma();

// True when this CPU runs 512-bit fused multiply-adds at full width: one
// thread, given nothing else to do, issues at least 1.5 times the floats'
// multiply-adds per second with AVX-512 as with AVX2 (twice on AMD's Zen 5
// and Intel's server cores; about the same on Zen 4, which splits each
// 512-bit instruction in two). avx512_full_width is that rule on two
// measured rates; the other measures them, once per process.
bool avx512_full_width(double fma_rate_avx512, double fma_rate_avx2);
bool cpu_runs_avx512_full_width();

// True when float32 products currently run on the AVX2 kernels (fast
// kernels on, and a CPU with AVX2 and FMA); and when large ones run on the
// AVX-512 tile, or small ones on the AVX-512 direct driver (a CPU with
// AVX-512F at full width, where those measured faster than the AVX2 ones).
bool gemm_uses_avx2();
bool gemm_uses_avx512();
bool gemm_direct_uses_avx512();
// True when float32 products currently run on the portable tile: fast
// kernels on, and a CPU other than x86-64, or an x86-64 one with FMA but no
// AVX2 (an x86-64 CPU without FMA keeps the blocked kernel below: a fused
// multiply-add there is a library call).
bool gemm_uses_portable();

// The tile the float32 products run, chosen by the rules above (kAuto), or
// forced, so that tests and benchmarks can run two of them in one process
// (bench/ember_bench --tiles). A forced tile this CPU cannot run is not
// run: the choice falls to the portable blocked kernel. Every tile gives
// the same bits.
enum class GemmTile { kAuto, kAvx2, kAvx512, kPortable };
GemmTile forced_gemm_tile();
void force_gemm_tile(GemmTile tile);

// Forces a tile for a scope: { GemmTileGuard portable(GemmTile::kPortable); ... }
class GemmTileGuard {
public:
    explicit GemmTileGuard(GemmTile tile) : previous_(forced_gemm_tile()) { force_gemm_tile(tile); }
    ~GemmTileGuard() { force_gemm_tile(previous_); }
    GemmTileGuard(const GemmTileGuard&) = delete;
    GemmTileGuard& operator=(const GemmTileGuard&) = delete;

private:
    GemmTile previous_;
};

// ---- gemm.cpp -----------------------------------------------------------------

// The portable blocked kernel: cache-blocked C++ that the compiler
// vectorises for baseline x86-64, with gemm_plain's bits (each element
// summed in increasing k, rounding after every multiply and add). It runs
// float64 products, and float32 ones on an x86-64 CPU without FMA.
void gemm_blocked(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm_blocked(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// Products whose A has at most this many rows (contiguous) and whose B is a
// transposed matrix (a Linear layer's W^T on a token or two) are computed
// as dot products of rows, summed in 16 lanes: another order than the
// tiles', fixed by the shape (gemm.cpp says why).
inline constexpr int64_t kDotRows = 4;

// out (m.rows x m.cols, row-major) = m, read through its strides. A
// transposed matrix (row stride 1) is copied in 8x8 blocks with AVX2, as
// gemm packs a transposed B; otherwise element by element, in the order
// that reads m's contiguous dim.
void copy_to_row_major(MatrixRef<const float> m, float* out);
void copy_to_row_major(MatrixRef<const double> m, double* out);

} // namespace ember::internal
