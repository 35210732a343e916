/* The machine's arithmetic ceiling: GFLOP/s of one thread issuing nothing but
 * independent fused multiply-adds, with 256-bit (AVX2) and, where the CPU has
 * them, 512-bit (AVX-512) vectors. Every SGEMM's GFLOP/s in
 * docs/performance.md is best read as a share of this number.
 *
 *     build/bench/fma_peak
 *
 * Each loop keeps 12 (AVX2) or 24 (AVX-512) accumulators, enough to cover
 * the FMA latency on both pipes, and prints one JSON line. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Where the accumulators are summed at the end, so that the compiler keeps the work. */
static volatile float sink;

__attribute__((target("avx2,fma"))) static double peak_avx2(long steps) {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps((float)i * 1e-3f);
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    double t = now();
    for (long s = 0; s < steps; ++s)
#pragma GCC unroll 12
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
    t = now() - t;
    for (int i = 0; i < 12; ++i) sink += acc[i][0]; /* keep the work */
    return (double)steps * 12 * 8 * 2 / t / 1e9;
}

__attribute__((target("avx512f"))) static double peak_avx512(long steps) {
    __m512 acc[24];
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    double t = now();
    for (long s = 0; s < steps; ++s)
#pragma GCC unroll 24
        for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
    t = now() - t;
    for (int i = 0; i < 24; ++i) sink += acc[i][0];
    return (double)steps * 24 * 16 * 2 / t / 1e9;
}

int main(void) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "fma_peak: this CPU has no AVX2 + FMA\n");
        return 1;
    }
    printf("{\"name\":\"fma_peak_avx2\",\"threads\":1,\"gflops\":%.1f}\n", peak_avx2(400000000L));
    if (__builtin_cpu_supports("avx512f"))
        printf("{\"name\":\"fma_peak_avx512\",\"threads\":1,\"gflops\":%.1f}\n", peak_avx512(200000000L));
    return 0;
}
