// FlashAttention: scaled_dot_product_attention without storing the (L,S)
// weights, forward and backward (fast::scaled_dot_product_attention,
// dispatch.h). The definition it replaces is the composition in
// core/ops/attention.cpp; this computes the same result up to rounding (the
// online softmax sums in another order) and drops the same weights for the
// same generator state. Keys are visited a block at a time with the softmax
// kept "online" (a running max and sum per query row), and the backward
// recomputes each block of weights from q, k and the saved log-sum-exp.
// docs/flash_attention.md derives both passes; tests/test_kernels.cpp
// compares them with the definition, tests/test_sdpa.cpp with PyTorch.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/dropout.h"
#include "core/kernels/flash_attention_steps.h"
#include "core/kernels/gemm.h"
#include "core/kernels/vectorize.h"
#include "core/loops/exponential.h"
#include "core/loops/iter.h"
#include "core/loops/map.h"
#include "core/ops/attention.h"
#include "core/ops/ops.h"
#include "core/random/fill.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

// Shapes: q (..., L, E), k (..., S, E), v (..., S, Ev) -> out (..., L, Ev).
// The leading dims broadcast; each of their positions is a "slice" (B*NH of
// them in a transformer), an independent attention problem. Threads take
// whole slices (in the forward, blocks of query rows), and every sum runs
// in one fixed order, so no result depends on the thread count.
//
// The online softmax, for one query row and keys in blocks b = 1, 2, ...
// (s_b: the row's scores against block b, v_b: those keys' values):
//   m_b = max(m_{b-1}, max s_b)                                the running max
//   l_b = l_{b-1} e^(m_{b-1} - m_b) + sum e^(s_b - m_b)        the running sum
//   o_b = o_{b-1} e^(m_{b-1} - m_b) + e^(s_b - m_b) @ v_b      the running output
// and after the last block out = o / l and lse = m + log l. Rescaling by
// e^(m_{b-1} - m_b) keeps every exponent <= 0, as softmax subtracts the
// row's max; the result is softmax(s) @ v up to rounding. Dropout multiplies
// e^(s - m) by the kept mask after it has been added to l, since dropout
// comes after the softmax's division.

namespace ember::internal {

namespace {

// Under the causal mask a block on the diagonal is a triangle: its first
// query rows see few of its keys. The products over such a block go a strip
// of kStrip rows (or keys) at a time and leave out the part of the strip
// the mask hides. What they leave out is a weight e^(-inf) = 0 or its
// gradient 0, times a finite value: a multiply-add of exactly 0, so the
// strips give the bits the whole block gives, at 5/8 of its work on a 64 x
// 64 block (tests/test_kernels.cpp compares the two). The last strip takes
// in what is left (16 to 31 rows; a block of fewer than 32 is one strip):
// a product of 4 rows or fewer would sum in another order (fast::gemm's
// dot_rows), and the bits would change.
constexpr int64_t kStrip = 16;

// The length of the strip from `at` in [0, n): kStrip, or all that is
// left when that is less than two strips.
inline int64_t strip_at(int64_t at, int64_t n) { return n - at < 2 * kStrip ? n - at : kStrip; }

// ---- the problem ------------------------------------------------------------------------------

// One operand, slice by slice: element (i, j) of slice s is at
// data + offset[s] + i * row_stride + j * col_stride. T is const for the
// ones read.
template <typename T>
struct Operand {
    T* data = nullptr;
    std::vector<int64_t> offset;
    int64_t row_stride = 0, col_stride = 0;

    MatrixRef<T> block(int64_t slice, int64_t row0, int64_t rows, int64_t col0, int64_t cols) const {
        return {data + offset[slice] + row0 * row_stride + col0 * col_stride, rows, cols, row_stride, col_stride};
    }
    T* at(int64_t slice, int64_t i, int64_t j) const { return data + offset[slice] + i * row_stride + j * col_stride; }
};

// `t` read (T const) or written as if expanded to batch + (rows, cols).
template <typename T>
Operand<T> operand(const Tensor& t, const Shape& batch, int64_t rows, int64_t cols) {
    Shape full = batch;
    full.push_back(rows);
    full.push_back(cols);
    const Shape strides = broadcast_strides(t, full);
    Operand<T> op{data_of<std::remove_const_t<T>>(t), {}, strides[strides.size() - 2], strides.back()};
    const int64_t count = shape_numel(batch);
    op.offset.resize(static_cast<size_t>(count));
    for (int64_t s = 0; s < count; ++s) op.offset[s] = offset_of(s, batch, std::span(strides).first(batch.size()));
    return op;
}

// What both passes need to know about one call.
template <typename T>
struct Problem {
    int64_t slices = 0, L = 0, S = 0, E = 0, Ev = 0;
    T scale = 1;
    Operand<const T> q, k, v;
    AttentionMask mask_kind = AttentionMask::none;
    Operand<const bool> allowed; // AttentionMask::allowed: true where a query may attend to a key
    Operand<const T> add_mask;   // AttentionMask::additive: added to the scores
    // Dropout: bit (slice*L + i)*S + j of keep_bits is 1 where weight (i, j)
    // is kept (and scaled by keep); null without dropout.
    const uint64_t* keep_bits = nullptr;
    T keep = 1;
    // The slices in the order their queries lie in memory, which is the
    // order the threads take them in (Note [slices in memory order]).
    std::vector<int64_t> order;

    // How many of keys [j0, j0 + cols) the first of rows [i0, ...) sees:
    // `first` of the element-wise steps in flash_attention_steps.h (row r
    // sees first + r, or all cols without the causal mask).
    int64_t first_seen(int64_t i0, int64_t j0, int64_t cols) const {
        return mask_kind == AttentionMask::causal ? i0 + 1 - j0 : cols;
    }

    // The end of the keys that query rows [i0, i0 + rows) can see: all of
    // them, or with the causal mask (key j <= query i) up to i0 + rows.
    int64_t key_end(int64_t i0, int64_t rows) const {
        return mask_kind == AttentionMask::causal ? std::min(S, i0 + rows) : S;
    }

    // Query rows [i0, i0 + rows) against keys [j0, j0 + cols), in strips of
    // rows: f(r0, h, seen) for rows [r0, r0 + h) of the block, which see
    // its keys [0, seen) (all cols without the causal mask: one strip).
    template <class F>
    void row_strips(int64_t i0, int64_t rows, int64_t j0, int64_t cols, F f) const {
        const bool causal = mask_kind == AttentionMask::causal;
        for (int64_t r0 = 0, h = 0; r0 < rows; r0 += h) {
            h = causal ? strip_at(r0, rows) : rows;
            const int64_t seen = causal ? std::clamp<int64_t>(i0 + r0 + h - j0, 0, cols) : cols;
            if (seen > 0) f(r0, h, seen);
        }
    }

    // The same block in strips of keys: f(c0, keys, first) for keys [c0,
    // c0 + keys) of the block, which rows [first, rows) see.
    template <class F>
    void key_strips(int64_t i0, int64_t rows, int64_t j0, int64_t cols, F f) const {
        const bool causal = mask_kind == AttentionMask::causal;
        for (int64_t c0 = 0, keys = 0; c0 < cols; c0 += keys) {
            keys = causal ? strip_at(c0, cols) : cols;
            const int64_t first = causal ? std::clamp<int64_t>(j0 + c0 - i0, 0, rows) : 0;
            if (first < rows) f(c0, keys, first);
        }
    }

    // s (rows x cols, row stride ld) = the scores of queries [i0, +rows)
    // against keys [j0, +cols): q k^T * scale, then the mask. kt is the
    // slice's k transposed, (E,S) row-major.
    void scores(int64_t slice, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const T* kt, T* s,
                int64_t ld) const {
        row_strips(i0, rows, j0, cols, [&](int64_t r0, int64_t h, int64_t seen) {
            fast::gemm(q.block(slice, i0 + r0, h, 0, E), MatrixRef<const T>{kt + j0, E, seen, S, 1},
                       MatrixRef<T>{s + r0 * ld, h, seen, ld, 1}, false);
        });
        // Scaled; with the causal mask, keys j > i (which the strips left
        // unwritten) -inf. Then the other masks.
        scale_scores(s, rows, cols, first_seen(i0, j0, cols), ld, scale);
        if (mask_kind != AttentionMask::allowed && mask_kind != AttentionMask::additive) return;
        const T neg_inf = -std::numeric_limits<T>::infinity();
        for (int64_t r = 0; r < rows; ++r) {
            T* row = s + r * ld;
            const int64_t i = i0 + r;
            if (mask_kind == AttentionMask::allowed) {
                for (int64_t c = 0; c < cols; ++c)
                    if (!*allowed.at(slice, i, j0 + c)) row[c] = neg_inf;
            } else {
                for (int64_t c = 0; c < cols; ++c) row[c] += *add_mask.at(slice, i, j0 + c);
            }
        }
    }

    // Dropout on query i's weights p[0, cols) for keys from j0 (cols <= 64):
    // p * keep where kept, else 0.
    void drop(int64_t slice, int64_t i, int64_t j0, int64_t cols, T* p) const {
        // The row's bits, first to last, as one word: bit c for key j0 + c.
        const int64_t first = (slice * L + i) * S + j0, word = first >> 6, shift = first & 63;
        uint64_t bits = keep_bits[word] >> shift;
        if (shift != 0 && shift + cols > 64) bits |= keep_bits[word + 1] << (64 - shift);
        keep_where(p, cols, bits, keep);
    }
};

template <typename T>
Problem<T> problem(const AttentionCall& c, const Tensor& q, const Tensor& k, const Tensor& v, const DropoutBits& drop) {
    Problem<T> a;
    a.slices = shape_numel(c.batch);
    a.L = c.L, a.S = c.S, a.E = c.E, a.Ev = c.Ev;
    a.scale = static_cast<T>(c.scale);
    a.q = operand<const T>(q, c.batch, c.L, c.E);
    a.k = operand<const T>(k, c.batch, c.S, c.E);
    a.v = operand<const T>(v, c.batch, c.S, c.Ev);
    a.mask_kind = c.mask_kind;
    if (c.mask_kind == AttentionMask::allowed) a.allowed = operand<const bool>(c.mask, c.batch, c.L, c.S);
    if (c.mask_kind == AttentionMask::additive) a.add_mask = operand<const T>(c.mask, c.batch, c.L, c.S);
    if (drop.words.defined()) a.keep_bits = reinterpret_cast<const uint64_t*>(drop.words.data_ptr<int64_t>());
    a.keep = static_cast<T>(drop.scale);
    a.order.resize(static_cast<size_t>(a.slices));
    std::iota(a.order.begin(), a.order.end(), int64_t{0});
    std::stable_sort(a.order.begin(), a.order.end(),
                     [&](int64_t x, int64_t y) { return a.q.offset[x] < a.q.offset[y]; });
    return a;
}

// Note [slices in memory order]. The fast model cuts its heads from one
// (B,T,3C) projection and views them (NH,B,T,hs): slice after slice is
// head after head, while memory runs batch element after batch element.
// Threads split the slices into runs; taken head by head, each thread
// would read every token's rows, half of them written by the other core
// (the projection before and the one after split C's rows between the
// threads). Taken in memory order, a thread reads the rows of its own
// batch elements, which the projection wrote on the same core, and the
// data stays in that core's cache. Each slice's results are its own: the
// same bits in any order.

// out = m's transpose, (cols, rows) row-major: a slice's k or v laid out so
// that a block of k^T or v^T has contiguous rows, as gemm reads B fastest.
template <typename T>
void transpose_into(MatrixRef<const T> m, std::vector<T>& out) {
    out.resize(static_cast<size_t>(m.rows * m.cols));
    copy_to_row_major(MatrixRef<const T>{m.data, m.cols, m.rows, m.col_stride, m.row_stride}, out.data());
}

// ---- forward --------------------------------------------------------------------------------

// One thread's scratch: the slice whose k^T is in kt, a block of scores
// turned weights, and per query row the output so far, the max and the sum.
template <typename T>
struct ForwardScratch {
    int64_t kt_slice = -1;
    std::vector<T> kt, p, o, m, l;
};

// Query rows [i0, i0 + rows) of one slice: their rows of out, and lse (rows).
template <typename T>
void forward_rows(const Problem<T>& a, int64_t slice, int64_t i0, int64_t rows, const Operand<T>& out, T* lse,
                  ForwardScratch<T>& w) {
    if (w.kt_slice != slice) {
        transpose_into(a.k.block(slice, 0, a.S, 0, a.E), w.kt);
        w.kt_slice = slice;
    }
    const T neg_inf = -std::numeric_limits<T>::infinity();
    w.p.resize(kBlock * kBlock);
    w.o.assign(static_cast<size_t>(rows * a.Ev), T(0));
    w.m.assign(static_cast<size_t>(rows), neg_inf);
    w.l.assign(static_cast<size_t>(rows), T(0));
    for (int64_t j0 = 0; j0 < a.key_end(i0, rows); j0 += kBlock) {
        const int64_t cols = std::min(kBlock, a.S - j0);
        T* p = w.p.data();
        a.scores(slice, i0, rows, j0, cols, w.kt.data(), p, kBlock);
        // p = e^(s - m_new); what came before is rescaled by e^(m_old - m_new).
        online_softmax_block(p, rows, cols, a.first_seen(i0, j0, cols), kBlock, w.m.data(), w.l.data(), w.o.data(),
                             a.Ev);
        if (a.keep_bits)
            for (int64_t r = 0; r < rows; ++r) a.drop(slice, i0 + r, j0, cols, p + r * kBlock);
        // o += p @ v[j0:+cols]: (rows, cols) @ (cols, Ev)
        a.row_strips(i0, rows, j0, cols, [&](int64_t r0, int64_t h, int64_t seen) {
            fast::gemm(MatrixRef<const T>{p + r0 * kBlock, h, seen, kBlock, 1}, a.v.block(slice, j0, seen, 0, a.Ev),
                       MatrixRef<T>{w.o.data() + r0 * a.Ev, h, a.Ev, a.Ev, 1}, true);
        });
    }
    // out = o / l (a row whose keys are all masked: 0 / 0 = NaN, as softmax
    // gives), lse = m + log l.
    // (out's columns are contiguous: laid_out_like keeps the last dim innermost.)
    divide_rows(w.o.data(), w.l.data(), rows, a.Ev, out.at(slice, i0, 0), out.row_stride);
    for (int64_t r = 0; r < rows; ++r) lse[r] = w.m[r] + std::log(w.l[r]);
}

// out (slices, L, Ev), and lse (slices, L) contiguous.
template <typename T>
void forward(const Problem<T>& a, const Operand<T>& out, T* lse) {
    const int64_t blocks = (a.L + kBlock - 1) / kBlock;              // blocks of query rows per slice
    const int64_t work = std::min(kBlock, a.L) * a.S * (a.E + a.Ev); // multiply-adds of one block
    // (A thread that finishes its items early takes some of the other's:
    // Note [Taking work from the other end] in core/loops/parallel.h.)
    parallel_for_balanced(0, a.slices * blocks, grain_for(work, kGemmParallelWork), 1, [&](int64_t begin, int64_t end) {
        static thread_local ForwardScratch<T> scratch; // reused: no allocation once warm
        scratch.kt_slice = -1;
        for (int64_t item = begin; item < end; ++item) {
            const int64_t slice = a.order[item / blocks], i0 = (item % blocks) * kBlock;
            const int64_t rows = std::min(kBlock, a.L - i0);
            forward_rows(a, slice, i0, rows, out, lse + slice * a.L + i0, scratch);
        }
    });
}

// ---- backward -------------------------------------------------------------------------------
//
// With P = softmax(s), recomputed block by block as e^(s - lse), and Z the
// dropout mask (keep or 0; all ones without dropout), forward out = (P Z) @ v:
//   dv = (P Z)^T @ dout
//   dP = (dout @ v^T) Z
//   ds = P (dP - D),   D_i = sum_j P_ij dP_ij = sum_c dout_ic out_ic
//   dq = ds @ k * scale,   dk = ds^T @ q * scale
// (products written P Z are element-wise). For each block of keys, over the
// blocks of queries that see it, dk and dv of that block and dq of those
// rows add up. One thread owns a slice, so no two threads add into one
// gradient.

template <typename T>
struct BackwardScratch {
    std::vector<T> kt, vt, p, pz, dp, d;
};

// What the backward reads beside the problem, and the gradients it writes,
// each (slices, rows, cols) as its operand says.
template <typename T>
struct BackwardIO {
    Operand<const T> out, dout;
    const T* lse = nullptr; // (slices, L), contiguous
    Operand<T> dq, dk, dv;
};

// m = 0.
template <typename T>
void zero(MatrixRef<T> m) {
    for (int64_t i = 0; i < m.rows; ++i)
        for (int64_t j = 0; j < m.cols; ++j) m.at(i, j) = T(0);
}

// One slice's dq (L,E), dk (S,E) and dv (S,Ev).
template <typename T>
void backward_slice(const Problem<T>& a, int64_t slice, const BackwardIO<T>& io, BackwardScratch<T>& w) {
    const int64_t L = a.L, S = a.S, E = a.E, Ev = a.Ev;
    // The products below add into this slice's gradients, which start from
    // zero here (the caller allocates them uninitialised): zeroed a slice
    // at a time, by the thread that owns it, just before the products read
    // them, rather than in a pass over all of them first.
    zero(io.dq.block(slice, 0, L, 0, E));
    zero(io.dk.block(slice, 0, S, 0, E));
    zero(io.dv.block(slice, 0, S, 0, Ev));
    transpose_into(a.k.block(slice, 0, S, 0, E), w.kt);
    transpose_into(a.v.block(slice, 0, S, 0, Ev), w.vt);
    w.p.resize(kBlock * kBlock);
    w.pz.resize(kBlock * kBlock);
    w.dp.resize(kBlock * kBlock);
    w.d.resize(static_cast<size_t>(L));
    const T* lse = io.lse + slice * L;
    // D_i = sum_c dout_ic out_ic, in increasing c; four rows side by side,
    // so that their chains of dependent adds overlap (the same bits).
    const int64_t dcs = io.dout.col_stride, ocs = io.out.col_stride;
    for (int64_t i = 0; i < L; i += 4) {
        const int64_t n = std::min<int64_t>(4, L - i);
        const T *dout[4], *out[4];
        for (int64_t g = 0; g < 4; ++g) // rows past L repeat the last one
            dout[g] = io.dout.at(slice, i + std::min(g, n - 1), 0),
            out[g] = io.out.at(slice, i + std::min(g, n - 1), 0);
        T sum[4] = {};
        for (int64_t c = 0; c < Ev; ++c)
            for (int64_t g = 0; g < 4; ++g) sum[g] += dout[g][c * dcs] * out[g][c * ocs];
        for (int64_t g = 0; g < n; ++g) w.d[i + g] = sum[g];
    }
    for (int64_t j0 = 0; j0 < S; j0 += kBlock) {
        const int64_t cols = std::min(kBlock, S - j0);
        // With the causal mask only queries i >= j0 see these keys.
        const int64_t i_begin = a.mask_kind == AttentionMask::causal ? j0 : 0;
        for (int64_t i0 = i_begin; i0 < L; i0 += kBlock) {
            const int64_t rows = std::min(kBlock, L - i0);
            T* p = w.p.data();
            T* dp = w.dp.data();
            // P = e^(s - lse)
            a.scores(slice, i0, rows, j0, cols, w.kt.data(), p, kBlock);
            softmax_from_lse(p, rows, cols, a.first_seen(i0, j0, cols), kBlock, lse + i0);
            // dP = (dout @ v^T) Z: (rows, Ev) @ (Ev, cols); where the causal
            // mask hides a key it is left unwritten, and score_gradient
            // writes 0 there (p = 0, or past seen_of).
            a.row_strips(i0, rows, j0, cols, [&](int64_t r0, int64_t h, int64_t seen) {
                fast::gemm(io.dout.block(slice, i0 + r0, h, 0, Ev),
                           MatrixRef<const T>{w.vt.data() + j0, Ev, seen, S, 1},
                           MatrixRef<T>{dp + r0 * kBlock, h, seen, kBlock, 1}, false);
            });
            // dv[j0:+cols] += (P Z)^T @ dout[i0:+rows]: (cols, rows) @ (rows, Ev)
            const T* pz = p;
            if (a.keep_bits) {
                std::copy(p, p + rows * kBlock, w.pz.data());
                for (int64_t r = 0; r < rows; ++r) {
                    a.drop(slice, i0 + r, j0, cols, w.pz.data() + r * kBlock);
                    a.drop(slice, i0 + r, j0, cols, dp + r * kBlock);
                }
                pz = w.pz.data();
            }
            a.key_strips(i0, rows, j0, cols, [&](int64_t c0, int64_t keys, int64_t first) {
                fast::gemm(MatrixRef<const T>{pz + first * kBlock + c0, keys, rows - first, 1, kBlock},
                           io.dout.block(slice, i0 + first, rows - first, 0, Ev),
                           io.dv.block(slice, j0 + c0, keys, 0, Ev), true);
            });
            // ds * scale = P (dP - D) * scale, in dp's place; 0 where a key was masked out.
            score_gradient(dp, p, rows, cols, a.first_seen(i0, j0, cols), kBlock, w.d.data() + i0, lse + i0, a.scale);
            // dq[i0:+rows] += ds @ k[j0:+cols];  dk[j0:+cols] += ds^T @ q[i0:+rows]
            a.row_strips(i0, rows, j0, cols, [&](int64_t r0, int64_t h, int64_t seen) {
                fast::gemm(MatrixRef<const T>{dp + r0 * kBlock, h, seen, kBlock, 1}, a.k.block(slice, j0, seen, 0, E),
                           io.dq.block(slice, i0 + r0, h, 0, E), true);
            });
            a.key_strips(i0, rows, j0, cols, [&](int64_t c0, int64_t keys, int64_t first) {
                fast::gemm(MatrixRef<const T>{dp + first * kBlock + c0, keys, rows - first, 1, kBlock},
                           a.q.block(slice, i0 + first, rows - first, 0, E), io.dk.block(slice, j0 + c0, keys, 0, E),
                           true);
            });
        }
    }
}

template <typename T>
void backward(const Problem<T>& a, const BackwardIO<T>& io) {
    const int64_t work = a.L * a.S * (2 * a.E + 2 * a.Ev); // multiply-adds of one slice, roughly
    parallel_for_balanced(0, a.slices, grain_for(work, kGemmParallelWork), 1, [&](int64_t begin, int64_t end) {
        static thread_local BackwardScratch<T> scratch;
        for (int64_t s = begin; s < end; ++s) backward_slice(a, a.order[s], io, scratch);
    });
}

// (..., rows, cols) over the call's batch dims.
Shape batched(const AttentionCall& c, int64_t rows, int64_t cols) {
    Shape s = c.batch;
    s.push_back(rows);
    s.push_back(cols);
    return s;
}

// A fresh tensor of `shape` (zeroed or not) whose dims nest in memory as
// like's do, with the last innermost. q, k and v cut from one (B,T,3C)
// projection and viewed as heads, (NH,B,T,hs), so give an output and
// gradients laid out (B,T,NH,hs): merging the heads back into (B,T,C), and
// their gradients into the projection's, is then a view, not a copy
// (PyTorch's CPU flash attention lays its output out so too). The values
// do not depend on the layout. Contiguous, as the definition's result, when
// like is contiguous, has another number of dims, or its last dim is not its
// innermost.
Tensor laid_out_like(const Tensor& like, const Shape& shape, bool zeroed) {
    const Shape order = memory_order(like);
    if (like.dim() != static_cast<int64_t>(shape.size()) || order.back() != like.dim() - 1)
        return zeroed ? zeros(shape, like.dtype()) : empty(shape, like.dtype());
    Shape nested(shape.size()), back(shape.size());
    for (size_t i = 0; i < order.size(); ++i) {
        nested[i] = shape[order[i]];
        back[order[i]] = static_cast<int64_t>(i);
    }
    return (zeroed ? zeros(nested, like.dtype()) : empty(nested, like.dtype())).permute(back);
}

// The gradients of q, k and v, zeroed or not, each laid out as its input lies
// (laid_out_like). When q, k and v are three equal pieces of one tensor, as
// the fast model cuts them from its (B,T,3C) projection, the gradients are
// the same pieces of one buffer: the split's backward then finds them side
// by side and takes that buffer as the projection's gradient, with no copy
// (fast::split_gradient_whole). The pieces: the same shape, strides and
// storage, at offsets one step apart in some order, which with that step
// as one more dim tile a block of memory with no gap or overlap (so q, k
// and v as one tensor, or overlapping views, get three buffers); and, as
// laid_out_like requires, the last dim innermost (stride 1), so that the
// products write each gradient by the same kernels as laid_out_like's (a
// few rows with another column stride would sum in another order).
std::array<Tensor, 3> gradients_like(const AttentionCall& c, const Tensor& q, const Tensor& k, const Tensor& v,
                                     bool zeroed) {
    const Shape shape = batched(c, c.L, c.E);
    std::array<int64_t, 3> at{q.storage_offset(), k.storage_offset(), v.storage_offset()};
    std::sort(at.begin(), at.end());
    const int64_t step = at[1] - at[0];
    const bool pieces = q.shape() == shape && k.shape() == shape && v.shape() == shape && q.numel() > 0 &&
                        k.storage() == q.storage() && v.storage() == q.storage() && k.strides() == q.strides() &&
                        v.strides() == q.strides() && q.strides().back() == 1 && step > 0 && at[2] - at[1] == step;
    if (pieces) {
        Shape joined = shape, strides = q.strides();
        joined.push_back(3);
        strides.push_back(step);
        if (is_non_overlapping_and_dense(make_view(q, joined, strides, at[0]))) {
            Tensor buffer = zeroed ? zeros({3 * q.numel()}, q.dtype()) : empty({3 * q.numel()}, q.dtype());
            auto piece = [&](const Tensor& x) {
                return make_view(buffer, shape, x.strides(), x.storage_offset() - at[0]);
            };
            return {piece(q), piece(k), piece(v)};
        }
    }
    return {laid_out_like(q, shape, zeroed), laid_out_like(k, batched(c, c.S, c.E), zeroed),
            laid_out_like(v, batched(c, c.S, c.Ev), zeroed)};
}

} // namespace

// ---- the op's fast path -------------------------------------------------------------------------

Tensor fast::scaled_dot_product_attention(const AttentionCall& c, const Tensor& query, const Tensor& key,
                                          const Tensor& value, Generator* generator) {
    const char* name = "scaled_dot_product_attention";
    // Dropout, as the definition's dropout draws it on the (..., L, S)
    // weights: one draw per weight in row-major order, kept as bits.
    DropoutBits drop;
    const int64_t n_weights = shape_numel(c.batch) * c.L * c.S;
    if (c.dropout_p > 0 && n_weights > 0) drop = draw_dropout_bits(n_weights, c.dropout_p, query.dtype(), generator);

    Tensor out = laid_out_like(query, batched(c, c.L, c.Ev), /*zeroed=*/c.S == 0);
    Tensor lse = empty({shape_numel(c.batch) * c.L}, query.dtype()); // log-sum-exp of each query row
    if (c.S > 0 && out.numel() > 0)
        dispatch_floating(query.dtype(), name, [&]<typename T>(TypeTag<T>) {
            forward(problem<T>(c, query, key, value, drop), operand<T>(out, c.batch, c.L, c.Ev), lse.data_ptr<T>());
        });

    if (needs_grad(query, key, value))
        attach(out, "ScaledDotProductFlashAttentionForCpuBackward0", {query, key, value},
               [c, drop, qs = SavedTensor(query), ks = SavedTensor(key), vs = SavedTensor(value),
                outs = SavedTensor(out), lse](const Tensor& dout) -> Grads {
                   const Tensor &q = qs.get(), &k = ks.get(), &v = vs.get();
                   // backward() zeroes the gradients itself, slice by slice; when it
                   // does not run, they are zeros from the start.
                   const bool runs = c.S > 0 && dout.numel() > 0;
                   const std::array<Tensor, 3> grads = gradients_like(c, q, k, v, /*zeroed=*/!runs);
                   const Tensor &dq = grads[0], &dk = grads[1], &dv = grads[2];
                   if (runs)
                       dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&]<typename T>(TypeTag<T>) {
                           const BackwardIO<T> io{operand<const T>(outs.get(), c.batch, c.L, c.Ev),
                                                  operand<const T>(dout, c.batch, c.L, c.Ev),
                                                  lse.data_ptr<T>(),
                                                  operand<T>(dq, c.batch, c.L, c.E),
                                                  operand<T>(dk, c.batch, c.S, c.E),
                                                  operand<T>(dv, c.batch, c.S, c.Ev)};
                           backward(problem<T>(c, q, k, v, drop), io);
                       });
                   // A broadcast input's gradient sums over the dims it was broadcast along.
                   return {sum_to(dq, q.shape()), sum_to(dk, k.shape()), sum_to(dv, v.shape())};
               });
    return out;
}

} // namespace ember::internal
