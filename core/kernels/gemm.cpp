// Matrix-multiply kernels: see gemm.h for the contract. This file holds the
// reference loop, the portable kernels, and the choice between them and the
// packed AVX2 kernel (gemm_packed.cpp).
//
// The portable blocked kernel tiles C into blocks. For each block of kKc consecutive k, the matching
// rows of B (kKc x kNc) are packed into a contiguous buffer, and each thread
// packs its own kMc rows of A; the inner loop then runs over contiguous memory
// (c_row[j] += a_ik * b_row[j]), which the compiler vectorises. Packing also
// absorbs any strides, so transposed inputs cost one copy of a block, not a
// strided inner loop. Threads split the rows of C: each owns its output rows.
// Tests: tests/test_matmul.cpp.
#include "core/kernels/gemm.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/kernels/gemm_packed.h"
#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"

namespace ember::internal {

// Block sizes: a packed B block (kKc x kNc) of floats is 256 KB and stays in
// L2; one packed A row (kKc) and one C tile row (kNc) stay in L1.
constexpr int64_t kMc = 32;
constexpr int64_t kKc = 256;
constexpr int64_t kNc = 256;

template <typename T>
static void gemm_reference_impl(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, bool accumulate) {
    for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t j = 0; j < c.cols; ++j) {
            T sum = accumulate ? c.at(i, j) : T(0);
            for (int64_t k = 0; k < a.cols; ++k) sum += a.at(i, k) * b.at(k, j);
            c.at(i, j) = sum;
        }
}

// Small products: rows of C in i-k-j order, the inner loop over a contiguous
// row of B (copied row-major first if it is not). Like every path here, each C element is
// summed in increasing k from its start value, in T: the paths agree bit for
// bit with each other and with gemm_reference.
template <typename T>
static void gemm_small(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, bool accumulate, int64_t row_begin,
                       int64_t row_end) {
    const int64_t n = c.cols, kk = a.cols;
    // The inner loop wants B's rows contiguous. A Linear layer's x @ W^T reads
    // B = W^T with a large column stride: copy B row-major first (k*n values,
    // small next to the m*n*k multiply-adds).
    std::vector<T> packed;
    if (b.col_stride != 1) {
        packed.resize(static_cast<size_t>(kk * n));
        for (int64_t k = 0; k < kk; ++k)
            for (int64_t j = 0; j < n; ++j) packed[k * n + j] = b.at(k, j);
        b = MatrixRef<const T>{packed.data(), kk, n, n, 1};
    }
    std::vector<T> row(n);
    for (int64_t i = row_begin; i < row_end; ++i) {
        for (int64_t j = 0; j < n; ++j) row[j] = accumulate ? c.at(i, j) : T(0);
        for (int64_t k = 0; k < kk; ++k) {
            const T aik = a.at(i, k);
            const T* brow = &b.at(k, 0);
            for (int64_t j = 0; j < n; ++j) row[j] += aik * brow[j];
        }
        for (int64_t j = 0; j < n; ++j) c.at(i, j) = row[j];
    }
}

template <typename T>
static void gemm_impl(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, bool accumulate) {
    const int64_t m = c.rows, n = c.cols, k = a.cols;
    if (m == 0 || n == 0) return;
    if (k == 0) { // an empty sum: C = 0 (or unchanged when accumulating)
        if (!accumulate)
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) c.at(i, j) = T(0);
        return;
    }
    // Small products: packing would cost more than it saves.
    if (m * n * k <= 64 * 64 * 64 || n < 16) {
        parallel_for(0, m, grain_for(n * k, kGemmParallelWork),
                     [&](int64_t b0, int64_t e0) { gemm_small(a, b, c, accumulate, b0, e0); });
        return;
    }

    std::vector<T> bpack(kKc * kNc);
    for (int64_t jc = 0; jc < n; jc += kNc) {
        const int64_t nc = std::min(kNc, n - jc);
        for (int64_t pc = 0; pc < k; pc += kKc) {
            const int64_t kc = std::min(kKc, k - pc);
            // Pack B[pc:pc+kc, jc:jc+nc] row-major: bpack[p*nc + j].
            for (int64_t p = 0; p < kc; ++p)
                for (int64_t j = 0; j < nc; ++j) bpack[p * nc + j] = b.at(pc + p, jc + j);
            // The first k block starts from C's old value or from zero;
            // later blocks add to what the earlier ones left in C.
            const bool add_to_c = accumulate || pc > 0;
            const int64_t row_blocks = (m + kMc - 1) / kMc;
            const int64_t grain = grain_for(kMc * nc * kc, kGemmParallelWork);
            parallel_for(0, row_blocks, grain, [&](int64_t rb_begin, int64_t rb_end) {
                std::vector<T> apack(kMc * kKc);
                std::vector<T> trow(kNc); // one row of the C block being summed
                for (int64_t rb = rb_begin; rb < rb_end; ++rb) {
                    const int64_t ic = rb * kMc;
                    const int64_t mc = std::min(kMc, m - ic);
                    // Pack A[ic:ic+mc, pc:pc+kc] row-major: apack[i*kc + p].
                    for (int64_t i = 0; i < mc; ++i)
                        for (int64_t p = 0; p < kc; ++p) apack[i * kc + p] = a.at(ic + i, pc + p);
                    // C block += apack @ bpack, one row of C at a time.
                    for (int64_t i = 0; i < mc; ++i) {
                        for (int64_t j = 0; j < nc; ++j) trow[j] = add_to_c ? c.at(ic + i, jc + j) : T(0);
                        const T* arow = &apack[i * kc];
                        for (int64_t p = 0; p < kc; ++p) {
                            const T aip = arow[p];
                            const T* brow = &bpack[p * nc];
                            for (int64_t j = 0; j < nc; ++j) trow[j] += aip * brow[j];
                        }
                        for (int64_t j = 0; j < nc; ++j) c.at(ic + i, jc + j) = trow[j];
                    }
                }
            });
        }
    }
}

bool gemm_uses_avx2() { return use_fast_kernels() && cpu_has_avx2_fma(); }

namespace {

// Seconds the fastest of `rounds` runs of c = a @ b took with `kernel`.
double fastest(void (*kernel)(MatrixRef<const float>, MatrixRef<const float>, MatrixRef<float>, bool),
               const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c, int64_t m, int64_t n,
               int64_t k, int rounds) {
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        const auto start = std::chrono::steady_clock::now();
        kernel({a.data(), m, k, k, 1}, {b.data(), k, n, n, 1}, {c.data(), m, n, n, 1}, false);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
}

using Kernel = void (*)(MatrixRef<const float>, MatrixRef<const float>, MatrixRef<float>, bool);

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

// The rule for the AVX-512 kernels: a CPU with AVX-512F runs them only where
// they measure faster than the AVX2 ones, once per process for each driver:
// the packed one on a product of 168 x 512 x 256 (about 2 ms), the direct
// one on 96 x 64 x 64 (well under 1 ms). CPUs that run 512-bit instructions
// at full width (AMD's Zen 5, Intel's Xeons) pick them; those that split
// each into two halves (Zen 4) may not. Both give the same bits as the AVX2
// kernels, so the choice never changes a result. docs/matmul.md.
bool gemm_uses_avx512() {
    if (!gemm_uses_avx2() || !cpu_has_avx512f()) return false;
    static const bool faster = measured_faster(gemm_packed_avx512, gemm_packed_avx2, 168, 512, 256, 3);
    return faster;
}

static bool gemm_direct_uses_avx512() {
    if (!gemm_uses_avx2() || !cpu_has_avx512f()) return false;
    static const bool faster = measured_faster(gemm_direct_avx512, gemm_direct_avx2, 96, 64, 64, 8);
    return faster;
}

// Multiply-adds up to which products skip packing and read the operands
// where they lie (gemm_direct_avx2 or _avx512): below about 146^3 the
// packing costs more than the cache locality it buys; at 256 x 256 x 64
// (attention's products at the lecture size) packing wins again.
// docs/matmul.md. Every kernel gives the same bits, so the choice never
// changes a result.
constexpr int64_t kDirectWork = int64_t{3} << 20;

// A few rows of A times a transposed B (a Linear layer's x @ W^T on one
// token, as generation runs it): every other path would first copy all of
// W^T to B's row-major layout, which costs as much as the product. Here
// each C element is a dot product of A's row and W's row, both contiguous,
// summed in 16 lanes (product k into lane k % 16, in increasing k), the
// lanes then added first to last, and added to C when accumulating. Another
// order than the tiles' (one FMA per k), so the last bits can differ from
// the same product with more rows; fixed by the shape alone, never by the
// thread count. Compiled for baseline, AVX2 and AVX-512 (vectorize.h).

EMBER_VECTOR_CLONES_512
static void dot_rows(const float* a, int64_t lda, const float* w, int64_t ldw, int64_t k, float* c, int64_t ldc,
                     int64_t m, int64_t j_begin, int64_t j_end, bool accumulate) {
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = j_begin; j < j_end; ++j) {
            const float* x = a + i * lda;
            const float* y = w + j * ldw;
            float lane[16] = {};
            int64_t p0 = 0;
            for (; p0 + 16 <= k; p0 += 16)
                for (int64_t q = 0; q < 16; ++q) lane[q] += x[p0 + q] * y[p0 + q];
            for (int64_t q = 0; p0 + q < k; ++q) lane[q] += x[p0 + q] * y[p0 + q];
            float sum = 0;
            for (int64_t q = 0; q < 16; ++q) sum += lane[q];
            float& out = c[i * ldc + j];
            out = accumulate ? out + sum : sum;
        }
}

void gemm(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    const int64_t m = c.rows, n = c.cols, k = a.cols;
    if (m == 0 || n == 0) return; // nothing to write
    if (use_fast_kernels() && m <= kDotRows && k > 0 && a.col_stride == 1 && b.row_stride == 1 && c.col_stride == 1) {
        // B = W^T with W's rows contiguous: W is b.data with row stride b.col_stride.
        parallel_for(0, n, grain_for(m * k, kGemmParallelWork), [&](int64_t j0, int64_t j1) {
            dot_rows(a.data, a.row_stride, b.data, b.col_stride, k, c.data, c.row_stride, m, j0, j1, accumulate);
        });
        return;
    }
    if (gemm_uses_avx2() && k > 0) {
        if (c.col_stride == 1 && m * n * k <= kDirectWork) {
            if (gemm_direct_uses_avx512()) gemm_direct_avx512(a, b, c, accumulate);
            else gemm_direct_avx2(a, b, c, accumulate);
            return;
        }
        if (gemm_uses_avx512()) gemm_packed_avx512(a, b, c, accumulate);
        else gemm_packed_avx2(a, b, c, accumulate);
        return;
    }
    gemm_impl(a, b, c, accumulate);
}
void gemm(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate) {
    gemm_impl(a, b, c, accumulate);
}
template <typename T>
static void copy_to_row_major_impl(MatrixRef<const T> m, T* out) {
    if (m.row_stride < m.col_stride) { // columns contiguous: read down them
        for (int64_t j = 0; j < m.cols; ++j)
            for (int64_t i = 0; i < m.rows; ++i) out[i * m.cols + j] = m.at(i, j);
    } else {
        for (int64_t i = 0; i < m.rows; ++i)
            for (int64_t j = 0; j < m.cols; ++j) out[i * m.cols + j] = m.at(i, j);
    }
}
void copy_to_row_major(MatrixRef<const float> m, float* out) {
    if (gemm_uses_avx2()) copy_rows_avx2(m, out);
    else copy_to_row_major_impl(m, out);
}
void copy_to_row_major(MatrixRef<const double> m, double* out) { copy_to_row_major_impl(m, out); }

void gemm_reference(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    gemm_reference_impl(a, b, c, accumulate);
}
void gemm_reference(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate) {
    gemm_reference_impl(a, b, c, accumulate);
}

} // namespace ember::internal
