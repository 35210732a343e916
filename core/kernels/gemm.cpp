// The fast matrix products: fast::gemm (dispatch.h) picks, for each product,
// the dot products of a Linear layer on a token, the AVX2 or AVX-512 tiles
// (gemm_packed.cpp, gemm_avx2.cpp, gemm_avx512.cpp), the portable tile
// (gemm_portable.cpp; which of them this CPU runs: gemm_select.cpp), or the
// portable blocked kernel below. Each sums every element of C in increasing
// k; the tiles fuse each multiply-add, so their float32 results differ from
// gemm_plain's in the last bits, and equal each other's.
// docs/matmul.md explains each kernel; tests: tests/test_kernels.cpp.
#include "core/kernels/gemm.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/kernels/gemm_packed.h"
#include "core/kernels/vectorize.h"
#include "core/loops/parallel.h"

// The portable blocked kernel tiles C into blocks. For each block of kBlockedKc
// consecutive k, the matching rows of B (kBlockedKc x kBlockedNc) are packed into a
// contiguous buffer, and each thread packs its own kBlockedMc rows of A; the inner
// loop then runs over contiguous memory (c_row[j] += a_ik * b_row[j]), which
// the compiler vectorises. Packing also absorbs any strides, so transposed
// inputs cost one copy of a block, not a strided inner loop. Threads split
// the rows of C: each owns its output rows.

namespace ember::internal {

namespace {

// Block sizes: a packed B block (kBlockedKc x kBlockedNc) of floats is 256 KB and stays in
// L2; one packed A row (kBlockedKc) and one C tile row (kBlockedNc) stay in L1.
constexpr int64_t kBlockedMc = 32;
constexpr int64_t kBlockedKc = 256;
constexpr int64_t kBlockedNc = 256;

template <typename T>
void blocked(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, bool accumulate) {
    const int64_t m = c.rows, n = c.cols, k = a.cols;
    // Small products (and empty sums): packing would cost more than it saves.
    if (m * n * k <= 64 * 64 * 64 || n < 16) {
        gemm_plain(a, b, c, accumulate);
        return;
    }
    std::vector<T> bpack(kBlockedKc * kBlockedNc);
    for (int64_t jc = 0; jc < n; jc += kBlockedNc) {
        const int64_t nc = std::min(kBlockedNc, n - jc);
        for (int64_t pc = 0; pc < k; pc += kBlockedKc) {
            const int64_t kc = std::min(kBlockedKc, k - pc);
            // Pack B[pc:pc+kc, jc:jc+nc] row-major: bpack[p*nc + j].
            for (int64_t p = 0; p < kc; ++p)
                for (int64_t j = 0; j < nc; ++j) bpack[p * nc + j] = b.at(pc + p, jc + j);
            // The first k block starts from C's old value or from zero;
            // later blocks add to what the earlier ones left in C.
            const bool add_to_c = accumulate || pc > 0;
            const int64_t row_blocks = (m + kBlockedMc - 1) / kBlockedMc;
            const int64_t grain = grain_for(kBlockedMc * nc * kc, kGemmParallelWork);
            parallel_for(0, row_blocks, grain, [&](int64_t rb_begin, int64_t rb_end) {
                std::vector<T> apack(kBlockedMc * kBlockedKc);
                std::vector<T> trow(kBlockedNc); // one row of the C block being summed
                for (int64_t rb = rb_begin; rb < rb_end; ++rb) {
                    const int64_t ic = rb * kBlockedMc;
                    const int64_t mc = std::min(kBlockedMc, m - ic);
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
void dot_rows(const float* a, int64_t lda, const float* w, int64_t ldw, int64_t k, float* c, int64_t ldc, int64_t m,
              int64_t j_begin, int64_t j_end, bool accumulate) {
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

template <typename T>
void copy_to_row_major_plain(MatrixRef<const T> m, T* out) {
    if (m.row_stride < m.col_stride) { // columns contiguous: read down them
        for (int64_t j = 0; j < m.cols; ++j)
            for (int64_t i = 0; i < m.rows; ++i) out[i * m.cols + j] = m.at(i, j);
    } else {
        for (int64_t i = 0; i < m.rows; ++i)
            for (int64_t j = 0; j < m.cols; ++j) out[i * m.cols + j] = m.at(i, j);
    }
}

} // namespace

void gemm_blocked(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    blocked(a, b, c, accumulate);
}
void gemm_blocked(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate) {
    blocked(a, b, c, accumulate);
}

namespace {
// fast::gemm's products of more than kDirectWork multiply-adds: the packed
// tiles, or the blocked kernel where none runs.
void gemm_packed_tiles(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    if (a.cols > 0) {
        if constexpr (kX86Tiles) {
            if (gemm_uses_avx512()) return gemm_packed_avx512(a, b, c, accumulate);
            if (gemm_uses_avx2()) return gemm_packed_avx2(a, b, c, accumulate);
        }
        if (gemm_uses_portable()) return gemm_packed_portable(a, b, c, accumulate);
    }
    blocked(a, b, c, accumulate);
}
} // namespace

void fast::gemm(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    const int64_t m = c.rows, n = c.cols, k = a.cols;
    if (m == 0 || n == 0) return; // nothing to write
    if (m <= kDotRows && k > 0 && a.col_stride == 1 && b.row_stride == 1 && c.col_stride == 1) {
        // B = W^T with W's rows contiguous: W is b.data with row stride b.col_stride.
        parallel_for(0, n, grain_for(m * k, kGemmParallelWork), [&](int64_t j0, int64_t j1) {
            dot_rows(a.data, a.row_stride, b.data, b.col_stride, k, c.data, c.row_stride, m, j0, j1, accumulate);
        });
        return;
    }
    if constexpr (kX86Tiles) {
        if (gemm_uses_avx2() && k > 0 && c.col_stride == 1 && m * n * k <= kDirectWork) {
            if (gemm_direct_uses_avx512()) gemm_direct_avx512(a, b, c, accumulate);
            else gemm_direct_avx2(a, b, c, accumulate);
            return;
        }
    }
    gemm_packed_tiles(a, b, c, accumulate);
}
void fast::gemm(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate) {
    blocked(a, b, c, accumulate);
}

// Note [A Linear's gradients on two threads]. linear's backward makes two
// products from G = dy (rows, out): dx = G @ W, a row of dx from each row
// of G, and dW = G^T @ x, each element of dW a sum over all the rows. Two
// threads cut each product in halves, and every other step of a training
// step cuts its rows of tokens in two at (nearly) the same place, so each
// thread's rows of x and G were written by that thread and sit in its
// core's cache.
// dx's halves read only those; dW's halves (its rows of out) read all the
// tokens, half of them from the other core, which costs most where the
// host put the two cores far apart (docs/matmul.md has the measurement).
//
// So on two threads the two products go together, each thread reading
// only its own tokens (and all of W); dW, out x in floats, is all that
// crosses. dW's columns are cut in a left and a right part:
//   thread 0: dW's left part over its tokens, then its right part, then its rows of dx;
//   thread 1: its rows of dx, then dW's columns continued over its own
//             tokens, left part first (once thread 0 has finished that
//             part), then the right part.
// Each thread does half of each product, and thread 1's dx takes longer
// than thread 0's quarter of dW, so it seldom waits. This replaced two
// rounds (thread 0's half of dW beside thread 1's dx, then the other way
// round), in each of which the thread with the half of dW finished last:
// dW's half took 4% to 17% longer than dx's (the macbook preset's
// Linears, a 2-core Zen 4), and the other thread waited. A whole call
// took 5% to 11% less. The cut is by dW's columns, not its rows, so
// that each part packs only its own columns of x (by rows, each would pack
// all of them); G^T, where a part is few panels wide, is read where it
// lies (block_rows in gemm_packed_driver.h).
//
// The two threads seldom run equally fast, so the last three of those
// pieces are WorkRanges, taken from each other's end (Note [Taking work
// from the other end] in core/loops/parallel.h): thread 0's rows of dx and
// thread 1's, in pieces of whole tiles (each thread packs W once, where
// W fits kPiecesFloats), and dW's columns continued over thread 1's
// tokens, the left part's and the right part's, in panels of 16 columns.
// A thread that finishes its own takes from the end of the other's: thread
// 0 the last columns of dW, then the last rows of thread 1's dx; thread 1
// the last rows of thread 0's dx. In 300 macbook preset steps on a 2-core
// Zen 4 the threads' waits at the end of these calls fell from 6% of
// their time in them to 1-2%.
// A thread that needs a part of thread 0's first sums before it has
// finished spins for it inside its timed chunk, which the busy-machine
// policy counts as work (Note [Threads on a busy machine]).
//
// Every kernel sums each element of C in increasing k from C's start
// value, storing and reloading it exactly between blocks of k, so dW
// summed over the first rows and then continued over the rest has the bits
// of one product over all of them (tests/test_kernels.cpp checks it). Not
// where a product would have kDotRows rows or fewer (out, or half the
// rows): the dot products that may run there sum in 16 lanes and add C at
// the end. Which thread takes which piece never changes a bit.
namespace {
std::atomic<int64_t> linear_gradients_split{0}; // calls that took the two threads' path (for the tests)

// The rows of the tile the float32 products run on: pieces of a whole
// number of them run fastest. (Where no tile runs, pieces of 8 rows.)
int64_t piece_rows() {
    if constexpr (kX86Tiles) {
        if (gemm_uses_avx512()) return kAvx512TileRows;
        if (gemm_uses_avx2()) return kAvx2TileRows;
    }
    if (gemm_uses_portable()) return gemm_portable_tile_rows();
    return 8;
}

// Whether gemm_pieces packs all of B once: where it fits kPiecesFloats
// (padded to 32 columns, the widest tile's). A larger B (a GPT-2 lm_head's
// W) is packed block by block for each piece instead.
bool packs_b_once(MatrixRef<const float> b) { return (b.cols + 31) / 32 * 32 * b.rows <= kPiecesFloats; }

// c = a @ b (+ c when accumulate) on the rows of C that next() gives, piece
// by piece: the bits of fast::gemm over all the rows (more than kDotRows
// of them: never the dot products, which a piece of a few rows would
// otherwise take).
void gemm_pieces(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                 const RowPieces& next) {
    if (a.cols > 0 && c.cols > 0 && packs_b_once(b)) {
        if constexpr (kX86Tiles) {
            if (gemm_uses_avx512()) return gemm_pieces_avx512(a, b, c, accumulate, next);
            if (gemm_uses_avx2()) return gemm_pieces_avx2(a, b, c, accumulate, next);
        }
        if (gemm_uses_portable()) return gemm_pieces_portable(a, b, c, accumulate, next);
    }
    WorkRange::Range rows;
    while (next(rows))
        gemm_packed_tiles({&a.at(rows.begin, 0), rows.end - rows.begin, a.cols, a.row_stride, a.col_stride}, b,
                          {&c.at(rows.begin, 0), rows.end - rows.begin, c.cols, c.row_stride, c.col_stride},
                          accumulate);
}
} // namespace

void fast::linear_gradients(MatrixRef<const float> g, MatrixRef<const float> w, MatrixRef<const float> x,
                            MatrixRef<float> dx, MatrixRef<float> dw) {
    const int64_t rows = g.rows, out = g.cols, in = w.cols;
    // dW's columns [c0, c1) summed over the rows [r0, r1) of G and x. Each
    // part runs on the driver the whole product would run on: a part under
    // kDirectWork multiply-adds would run direct, reading x's rows in place
    // again for each 6 rows of dW, where the packed driver copies them once
    // (2 threads, 300 macbook steps on a 2-core Zen 4: these calls 2-5%
    // faster packed, in 3 of 3 alternating pairs).
    using Product = void (*)(MatrixRef<const float>, MatrixRef<const float>, MatrixRef<float>, bool);
    const Product product =
        out > kDotRows && out * in * rows > kDirectWork ? gemm_packed_tiles : static_cast<Product>(fast::gemm);
    const auto dw_over = [&](int64_t c0, int64_t c1, int64_t r0, int64_t r1, bool accumulate) {
        product({&g.at(r0, 0), out, r1 - r0, g.col_stride, g.row_stride},
                {&x.at(r0, c0), r1 - r0, c1 - c0, x.row_stride, x.col_stride},
                {&dw.at(0, c0), out, c1 - c0, dw.row_stride, dw.col_stride}, accumulate);
    };
    const int64_t cut = (rows + 1) / 2; // where parallel_for cuts the rows
    if (get_num_threads() != 2 || out <= kDotRows || rows - cut <= kDotRows ||
        rows * out * in <= 2 * kGemmParallelWork) {
        fast::gemm(g, w, dx, false);
        dw_over(0, in, 0, rows, false);
        return;
    }
    // dW's left columns [0, left): a multiple of 16 near half (all of dW
    // when in is 16 or less).
    const int64_t left = in > 16 ? std::max<int64_t>(16, (in / 2 + 8) / 16 * 16) : in;
    linear_gradients_split.fetch_add(1, std::memory_order_relaxed);
    PartDone left_part, right_part; // thread 0's sums over its tokens
    // Each thread's rows of dx, in tiles; dW's panels of 16 columns to be
    // continued over thread 1's tokens, its left part's and its right's.
    const int64_t unit = piece_rows();
    WorkRange dx_tiles[2] = {{0, (cut + unit - 1) / unit}, {0, (rows - cut + unit - 1) / unit}};
    const int64_t left_panels = (left + 15) / 16;
    WorkRange dw_left(0, left_panels), dw_right(left_panels, (in + 15) / 16);
    // Pieces of at least 2 tiles; where W is too large to be packed once
    // per thread (packs_b_once), a thread takes its rows in one piece.
    const int64_t least = packs_b_once(w) ? 2 : (rows + unit - 1) / unit;
    // The rows of dx a piece of thread t's tiles covers.
    const auto dx_rows = [&](int64_t t, WorkRange::Range tiles) -> WorkRange::Range {
        const int64_t r0 = t == 0 ? 0 : cut, r1 = t == 0 ? cut : rows;
        return {r0 + tiles.begin * unit, std::min(r1, r0 + tiles.end * unit)};
    };
    // dW's panels, continued over thread 1's tokens once thread 0's sums of
    // those columns are done.
    const auto dw_rest = [&](WorkRange::Range panels) {
        const int64_t c0 = panels.begin * 16, c1 = std::min(in, panels.end * 16);
        if (c0 < left) left_part.wait();
        if (c1 > left) right_part.wait();
        dw_over(c0, c1, cut, rows, true);
    };
    // Thread t's pieces of dx: its own rows from the front; then dW's
    // columns continued over thread 1's tokens (thread 1 from the left,
    // thread 0 from the right); then the other thread's last rows of dx.
    const auto pieces_of = [&](int64_t t) {
        return [&, t](WorkRange::Range& piece) {
            WorkRange::Range r;
            if (dx_tiles[t].take_front(least, r)) return piece = dx_rows(t, r), true;
            const auto take = [&](WorkRange& panels) {
                return t == 1 ? panels.take_front(1, r) : panels.take_back(1, r);
            };
            while (take(t == 1 ? dw_left : dw_right)) dw_rest(r);
            while (take(t == 1 ? dw_right : dw_left)) dw_rest(r);
            if (dx_tiles[1 - t].take_back(least, r)) return piece = dx_rows(1 - t, r), true;
            return false;
        };
    };
    parallel_for(0, 2, 1, [&](int64_t begin, int64_t end) {
        if (begin == 0) {
            {
                // The right part's guard first: a throw in the left part marks both done.
                PartDone::Guard right_guard(right_part);
                {
                    PartDone::Guard left_guard(left_part);
                    dw_over(0, left, 0, cut, false);
                }
                if (left < in) dw_over(left, in, 0, cut, false);
            }
            gemm_pieces(g, w, dx, false, pieces_of(0));
        }
        if (end == 2) { // thread 1, or the calling thread after thread 0's part when the loop did not split
            gemm_pieces(g, w, dx, false, pieces_of(1));
        }
    });
}
int64_t fast::linear_gradients_runs() { return linear_gradients_split.load(std::memory_order_relaxed); }

void copy_to_row_major(MatrixRef<const float> m, float* out) {
    if constexpr (kX86Tiles) {
        if (gemm_uses_avx2()) {
            copy_rows_avx2(m, out);
            return;
        }
    }
    copy_to_row_major_plain(m, out);
}
void copy_to_row_major(MatrixRef<const double> m, double* out) { copy_to_row_major_plain(m, out); }

} // namespace ember::internal
