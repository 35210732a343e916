// Which kernels the float32 products run: the AVX2 tiles on a CPU with AVX2
// and FMA, and the AVX-512 ones on a CPU with AVX-512F where they measure
// faster than the AVX2 ones in this process. The rule and the measurement
// are here; what it picked on which CPUs, and the timings, are in
// docs/matmul.md ("When they run"). Every choice gives the same bits.
// Tests: tests/test_kernels.cpp (the tiles against each other).
#include <algorithm>
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

bool cpu_has_avx2_fma() {
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
}

bool cpu_has_avx512f() {
    static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    return has;
}

bool gemm_uses_avx2() { return use_fast_kernels() && cpu_has_avx2_fma(); }

// The rule for the AVX-512 kernels: a CPU with AVX-512F runs them only where
// they measure faster than the AVX2 ones, once per process for each driver,
// on a product the size of those it serves: the packed one on 168 x 512 x
// 256, the direct one on 96 x 64 x 64.
bool gemm_uses_avx512() {
    if (!gemm_uses_avx2() || !cpu_has_avx512f()) return false;
    static const bool faster = measured_faster(gemm_packed_avx512, gemm_packed_avx2, 168, 512, 256, 3);
    return faster;
}

bool gemm_direct_uses_avx512() {
    if (!gemm_uses_avx2() || !cpu_has_avx512f()) return false;
    static const bool faster = measured_faster(gemm_direct_avx512, gemm_direct_avx2, 96, 64, 64, 8);
    return faster;
}

} // namespace ember::internal
