// The portable register tile of the SGEMM, in the packed driver
// (gemm_packed_driver.h): written once in GCC/Clang vector extensions, no
// intrinsics, so the compiler makes NEON of it on arm64 and AVX on x86-64.
// It runs every large float32 product on CPUs other than x86-64, and on an
// x86-64 CPU with FMA but no AVX2 (gemm_select.cpp). Each C element sums its
// k in increasing order, one fused multiply-add per step: the bits of a
// scalar std::fma loop, and of the AVX2 tile. docs/matmul.md ("The portable
// tile"); tests/test_gemm_portable.cpp.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/kernels/gemm_packed.h"
#include "core/kernels/gemm_packed_driver.h"

// On x86-64 this file alone is compiled with -mavx -mfma (meson.build), and
// called only after a run-time check that the CPU has both: without a
// hardware FMA, each fused multiply-add below would be a call to fmaf.
#if defined(__x86_64__) && !(defined(__AVX__) && defined(__FMA__))
#error "on x86-64, gemm_portable.cpp is compiled with -mavx -mfma (meson.build)"
#endif

namespace ember::internal {

namespace {

// ---- the shape of the tile -------------------------------------------------------------------
//
// arm64 (and any CPU but x86-64): vectors of 4 floats, NEON's 128 bits, and
// a tile of 8 rows x 12 columns (3 vectors) of C. NEON has 32 vector
// registers: the tile's 24 accumulators, 3 for a row of B, and a few for
// A's elements (two vectors hold a packed column of 8), 29 or so in all.
// Each step of k issues 24 independent fused multiply-adds against 3 loads
// of B and 8 elements of A (2 vector loads when packed): about 0.2 loads
// per FMA, and 24 chains in flight, more than 4 FMA pipes of 4 cycles'
// latency (Apple's cores; 2 pipes on Cortex-A76 and Neoverse) need. An 8x8
// tile (16 accumulators) would need 0.25 loads per FMA and leave the pipes
// 16 chains; 8x16 (32 accumulators) does not fit.
//
// x86-64 (built with AVX and FMA): 16 vector registers of 8 floats, so the
// shape of the AVX2 tile (gemm_avx2.cpp): 6 rows x 16 columns (2 vectors),
// 12 accumulators, 2 registers for B and 1 for a broadcast element of A.
// The same source, at the same shape, beside the hand-written tile: what
// bench/ember_bench --tiles compares.
#if defined(__AVX__)
constexpr int kLanes = 8, kRows = 6, kVectors = 2;
#else
constexpr int kLanes = 4, kRows = 8, kVectors = 3;
#endif

using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

// v = p[0 .. kLanes), and back; p need not be aligned (memcpy of a whole
// vector is one unaligned load or store).
inline Vec load(const float* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// x in every lane (one vbroadcastss or dup).
inline Vec broadcast(float x) {
    Vec v;
    for (int l = 0; l < kLanes; ++l) v[l] = x;
    return v;
}

// a * b + c in each lane, rounded once. ember builds with -ffp-contract=off,
// so `a * b + c` is a multiply and an add, two roundings, and no compiler
// may fuse them; the fma must be asked for:
//   * clang 17 and later: __builtin_elementwise_fma, an fma by definition;
//   * older clang, optimising: `a * b + c` under `#pragma clang fp
//     contract(fast)`, which allows fusing in this one block (the backend
//     then fuses, as there is an FMA instruction; clang 14's vectoriser
//     makes poor arm64 code of the form below, splitting each vector in two
//     halves). Unoptimised (-O0) clang 14 does not fuse it: a multiply and
//     an add, which tests/test_gemm_portable.cpp caught in the sanitizer
//     build; so there it takes the next form;
//   * GCC, which has no vector fma builtin: std::fma lane by lane, which its
//     vectoriser turns into one vector FMA when the target has one.
// docs/matmul.md shows the assembly: one vfmadd231ps (x86-64) or fmla
// (arm64) per vector, no separate multiply. An unoptimised build (-O0)
// still computes the same bits, one fmaf call per lane; a clang that did
// not fuse would fail tests/test_gemm_portable.cpp, which compares bits.
inline Vec fused_multiply_add(Vec a, Vec b, Vec c) {
#if defined(__clang__) && __has_builtin(__builtin_elementwise_fma)
    return __builtin_elementwise_fma(a, b, c);
#elif defined(__clang__) && defined(__OPTIMIZE__)
#pragma clang fp contract(fast)
    return a * b + c;
#else
    Vec r;
    for (int l = 0; l < kLanes; ++l) r[l] = std::fma(a[l], b[l], c[l]);
    return r;
#endif
}

// ---- the tile ---------------------------------------------------------------------------------

constexpr int64_t kCols = kLanes * kVectors;

// c (kRows x kCols, row stride ldc) = (add ? c : 0) + a @ b over kc steps:
// b packed as kc rows of kCols floats; row i of A at a[i], its elements acs
// apart, or, Packed, a packed panel (row i at a[0] + i, elements kRows
// apart). Each c element sums over p in increasing order, one fused
// multiply-add per step.
template <bool Packed>
void tile(int64_t kc, const float* const a[kRows], int64_t acs, const float* b, float* c, int64_t ldc, bool add) {
    Vec acc[kRows][kVectors];
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 3
        for (int v = 0; v < kVectors; ++v) acc[i][v] = add ? load(c + i * ldc + v * kLanes) : Vec{};
    const float* a0 = a[0];
    for (int64_t p = 0; p < kc; ++p) {
        // One row of B (kVectors vectors), then each of the kRows elements
        // of A's column p broadcast and multiplied into its row of C.
        Vec bp[kVectors];
#pragma GCC unroll 3
        for (int v = 0; v < kVectors; ++v) bp[v] = load(b + p * kCols + v * kLanes);
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) {
            const Vec ai = broadcast(Packed ? a0[p * kRows + i] : a[i][p * acs]);
#pragma GCC unroll 3
            for (int v = 0; v < kVectors; ++v) acc[i][v] = fused_multiply_add(ai, bp[v], acc[i][v]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 3
        for (int v = 0; v < kVectors; ++v) store(c + i * ldc + v * kLanes, acc[i][v]);
}

// ---- packing ----------------------------------------------------------------------------------
//
// Full panels whose operand has its other dim contiguous: count lines of
// len floats, line r at src[r], written across out (out[p*ldo + r] =
// src[r][p]). Each line is read in order and written with a stride of ldo
// floats, all within one panel that stays in L1.
void transpose_lines(const float* const src[], int64_t count, int64_t len, float* out, int64_t ldo) {
    for (int64_t r = 0; r < count; ++r)
        for (int64_t p = 0; p < len; ++p) out[p * ldo + r] = src[r][p];
}

struct PortableTile {
    static constexpr int64_t kMr = kRows, kNr = kCols;
    static constexpr int64_t kKc = 256; // a packed A panel (8 x 256) and B panel (256 x 12) in L1
    static constexpr int64_t kMc = 96;  // rows of A per packed block: 96 x 256 floats = 96 KB (L2)
    static constexpr bool kThinEdges = false;

    static void kernel(int64_t kc, const float* const a[kMr], int64_t acs, const float* b, float* c, int64_t ldc,
                       bool add) {
        bool packed = acs == kMr;
        for (int i = 1; i < kMr && packed; ++i) packed = a[i] == a[0] + i;
        if (packed) tile<true>(kc, a, acs, b, c, ldc, add);
        else tile<false>(kc, a, acs, b, c, ldc, add);
    }

    // Rows [i0, i0 + kMr), columns [p0, p0 + kc) of A as out[p*kMr + i].
    static void pack_a_panel(MatrixRef<const float> a, int64_t i0, int64_t p0, int64_t kc, float* out) {
        if (a.col_stride == 1) { // rows contiguous
            const float* row[kMr];
            for (int64_t i = 0; i < kMr; ++i) row[i] = &a.at(i0 + i, p0);
            transpose_lines(row, kMr, kc, out, kMr);
            return;
        }
        // Columns contiguous (a transposed matrix): each step of k is kMr adjacent floats.
        for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * kMr, &a.at(i0, p0 + p), kMr * sizeof(float));
    }

    // Rows [p0, p0 + kc), columns [j0, j0 + kNr) of a B whose columns are
    // contiguous (W^T, k^T) as out[p*kNr + j].
    static void pack_b_panel_transposed(MatrixRef<const float> b, int64_t p0, int64_t kc, int64_t j0, float* out) {
        const float* col[kNr];
        for (int64_t j = 0; j < kNr; ++j) col[j] = &b.at(p0, j0 + j);
        transpose_lines(col, kNr, kc, out, kNr);
    }
};

} // namespace

void gemm_packed_portable(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    gemm_packed<PortableTile>(a, b, c, accumulate);
}

void gemm_packed_team_portable(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c,
                               bool accumulate) {
    gemm_packed_team<PortableTile>(a, b, c, accumulate);
}

int64_t gemm_portable_tile_rows() { return PortableTile::kMr; }

void gemm_pieces_portable(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                          const RowPieces& next) {
    gemm_packed_pieces<PortableTile>(a, b, c, accumulate, next);
}

int64_t gemm_portable_halves_run() { return halves_run.load(std::memory_order_relaxed); }

} // namespace ember::internal
