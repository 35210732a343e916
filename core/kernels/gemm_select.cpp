// Which kernels the float32 products run: the AVX2 tiles on a CPU with AVX2
// and FMA, and the AVX-512 ones on a CPU with AVX-512F at full width where
// they measure faster than the AVX2 ones in this process; the portable tile on every
// other CPU with FMA (any arm64 one). The rule and the measurement are here;
// what it picked on which CPUs, and the timings, are in docs/matmul.md
// ("When they run"). Every choice gives the same bits. Tests:
// tests/test_gemm.cpp, tests/test_gemm_portable.cpp (the tiles against each other).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/kernels/gemm.h"
#include "core/kernels/gemm_packed.h"

namespace ember::internal {

namespace {

using Kernel = void (*)(MatrixRef<const float>, MatrixRef<const float>, MatrixRef<float>, bool);

// Seconds the fastest of `rounds` runs of c = a @ b took with `kernel`.
double fastest(Kernel kernel, const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c,
               int64_t m, int64_t n, int64_t k, int rounds) {
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        const auto start = std::chrono::steady_clock::now();
        kernel({a.data(), m, k, k, 1}, {b.data(), k, n, n, 1}, {c.data(), m, n, n, 1}, false);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
}

// True when `avx512` ran c = a @ b (m x k times k x n) faster than `avx2`:
// the two alternated, so that a slow moment hits both, fastest run of each.
bool measured_faster(Kernel avx512, Kernel avx2, int64_t m, int64_t n, int64_t k, int rounds) {
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
    double t2 = 1e30, t512 = 1e30;
    for (int round = 0; round < rounds; ++round) {
        t2 = std::min(t2, fastest(avx2, a, b, c, m, n, k, 2));
        t512 = std::min(t512, fastest(avx512, a, b, c, m, n, k, 2));
    }
    return t512 < t2;
}

} // namespace

// The CPU checks exist only on x86-64 (__builtin_cpu_supports names x86
// features); elsewhere none of these sets is there.
#ifdef EMBER_X86_TILES
bool cpu_has_avx2_fma() {
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
}
bool cpu_has_avx512f() {
    static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    return has;
}
bool cpu_has_avx_fma() {
    static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("fma");
    return has;
}
#else
bool cpu_has_avx2_fma() { return false; }
bool cpu_has_avx512f() { return false; }
bool cpu_has_avx_fma() { return false; }
#endif

namespace {

// The forced tile (GemmTile::kAuto: none), like the fast kernels' switch a
// process-wide setting, for tests and benchmarks (GemmTileGuard).
std::atomic<GemmTile> forced{GemmTile::kAuto};

} // namespace

GemmTile forced_gemm_tile() { return forced.load(std::memory_order_relaxed); }
void force_gemm_tile(GemmTile tile) { forced.store(tile, std::memory_order_relaxed); }

bool gemm_uses_avx2() { return use_fast_kernels() && cpu_has_avx2_fma() && forced_gemm_tile() != GemmTile::kPortable; }

bool avx512_full_width(double fma_rate_avx512, double fma_rate_avx2) { return fma_rate_avx512 >= 1.5 * fma_rate_avx2; }

// Measured once per process: the highest rate of 5 short rounds of each
// (about 0.5 ms in all), alternated, so that a slow moment hits both.
bool cpu_runs_avx512_full_width() {
    if constexpr (kX86Tiles) {
        static const bool full = [] {
            if (!cpu_has_avx2_fma() || !cpu_has_avx512f()) return false;
            double avx2 = 0, avx512 = 0;
            for (int round = 0; round < 5; ++round) {
                avx2 = std::max(avx2, fma_rate_avx2(20000));
                avx512 = std::max(avx512, fma_rate_avx512(10000));
            }
            return avx512_full_width(avx512, avx2);
        }();
        return full;
    }
    return false;
}

// The rule for the AVX-512 kernels: a CPU with AVX-512F runs them only if
// its cores run 512-bit fused multiply-adds at full width, and then only
// where they measure faster than the AVX2 ones, once per process for each
// driver, on a product the size of those it serves: the packed one on 168
// x 512 x 256, the direct one on 96 x 64 x 64. `faster` makes (once) and
// keeps that measurement. A forced tile overrides both.
//
// Why the first condition: a core that splits each 512-bit instruction in
// two (AMD's Zen 4) does no more arithmetic per cycle with AVX-512, and
// there the two tiles tie on a product alone (168 x 512 x 256: within 1-2%,
// either one ahead from one process to the next), while in training the
// AVX-512 tiles lost: train_gpt --preset macbook, one thread, 2-4% fewer
// tokens per second in 4 of 4 alternating pairs (docs/matmul.md).
template <class Faster>
bool avx512_runs(const Faster& faster) {
    if (!gemm_uses_avx2() || !cpu_has_avx512f() || forced_gemm_tile() == GemmTile::kAvx2) return false;
    return forced_gemm_tile() == GemmTile::kAvx512 || (cpu_runs_avx512_full_width() && faster());
}

bool gemm_uses_avx512() {
    if constexpr (kX86Tiles) {
        return avx512_runs([] {
            static const bool faster = measured_faster(gemm_packed_avx512, gemm_packed_avx2, 168, 512, 256, 3);
            return faster;
        });
    }
    return false;
}

bool gemm_direct_uses_avx512() {
    if constexpr (kX86Tiles) {
        return avx512_runs([] {
            static const bool faster = measured_faster(gemm_direct_avx512, gemm_direct_avx2, 96, 64, 64, 8);
            return faster;
        });
    }
    return false;
}

// On x86-64 the portable tile is built for AVX and FMA: it runs on a CPU
// with both but without AVX2 (AMD's Piledriver and Steamroller), or where
// forced. Elsewhere it is the fast path.
bool gemm_uses_portable() {
    if (!use_fast_kernels()) return false;
    if constexpr (kX86Tiles) {
        const GemmTile tile = forced_gemm_tile();
        return cpu_has_avx_fma() && (tile == GemmTile::kPortable || (tile == GemmTile::kAuto && !cpu_has_avx2_fma()));
    }
    return true;
}

} // namespace ember::internal
