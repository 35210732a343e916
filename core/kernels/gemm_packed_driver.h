// Private to the gemm files: the packed SGEMM driver, generic over its
// register tile, in the classic BLIS/GotoBLAS loop nest drawn below.
// gemm_packed.cpp runs it around the AVX2 and AVX-512 tiles,
// gemm_portable.cpp around the portable one. Every C element sums its k in
// the same order whatever the tile and the thread count. docs/matmul.md
// explains it with a picture; tests/test_gemm.cpp, tests/test_gemm_portable.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "core/kernels/gemm_packed.h"
#include "core/loops/parallel.h"

// The loop nest:
//
//   one team of threads for the whole product (parallel_team; on two threads
//   the product is cut in two halves instead, each one thread's whole
//   product: Note [Two halves or one team] below):
//   for each block of kNc columns of C (jc):
//     for each block of kKc values of k (pc): 256 (AVX2, portable), 512 (AVX-512)
//       pack B[pc:+kc, jc:+nc] into panels of kNr columns    (threads share it, L3)
//       barrier: every panel is packed
//       each thread an equal run of C's kMr x kNr tiles,
//       taken row panel by row panel (so whole row panels, and part of
//       one at either end):
//         for each block of kMc rows (ic) in that run:
//           pack A[ic:+mc, pc:+kc] into panels of kMr rows      (per thread, L2)
//           for each kNr-column panel (jr), for each kMr-row panel (ir):
//             the micro-kernel: C[ir:+kMr, jr:+kNr] += Apanel @ Bpanel (registers)
//       barrier (before the next block is packed): every thread is done with this block
//
// (kMr x kNr is 6 x 16 for AVX2, 14 x 32 for AVX-512; the portable tile's
// is in gemm_portable.cpp.)
//
// Packing lays each panel out in exactly the order the micro-kernel reads
// it, whatever the strides of A and B (a transposed operand costs one copy
// of each block), and pads the last panels with zeros so the kernel never
// branches. Threads own disjoint tiles of C.
//
// A Tile is a struct of constants and static functions:
//   kMr, kNr          the micro-kernel's tile of C
//   kKc, kMc          the depth of a block of k; the rows of A per packed block
//   kernel            c (kMr x kNr) = (add ? c : 0) + a @ b, b a packed panel
//   pack_a_panel, pack_b_panel_transposed   full panels, as pack_a and pack_b describe
//   kThinEdges, edge_columns   whether C's last 1 to kEdgeCols columns have a
//                     kernel of their own (when A is read in place), and that kernel
//
// Everything here is in an unnamed namespace: each file that includes it
// compiles its own copy, for the instruction set that file is built for
// (gemm_portable.cpp is built with -mavx -mfma on x86-64), so that no copy
// built for one set can be linked in place of another.

namespace ember::internal {

namespace {

constexpr int64_t kNc = 4096;         // columns of B per packed block: kKc x 4096 floats = 4 or 8 MB (L3)
constexpr int64_t kInPlacePanels = 8; // at most this many panels of B: read A in place (block_rows)
constexpr int64_t kKcInPlace = 256;   // the depth of a block when A is read in place, with either tile

// Whether block_rows reads A where it lies for a block `panels` panels of B
// wide, instead of packing it: A's rows or columns contiguous, and few
// panels (block_rows explains why).
inline bool reads_a_in_place(MatrixRef<const float> a, int64_t panels) {
    return (a.col_stride == 1 || a.row_stride == 1) && panels <= kInPlacePanels;
}

// A 64-byte-aligned scratch buffer that grows as needed and is reused, so
// the hot loop allocates nothing once warm. One per thread (thread_local).
class Scratch {
public:
    float* get(size_t floats) {
        if (floats > size_) {
            ::operator delete (data_, std::align_val_t{64});
            data_ = nullptr, size_ = 0; // if the new one throws, nothing freed is kept
            data_ = static_cast<float*>(::operator new (floats * sizeof(float), std::align_val_t{64}));
            size_ = floats;
        }
        return data_;
    }
    ~Scratch() { ::operator delete (data_, std::align_val_t{64}); }

private:
    float* data_ = nullptr;
    size_t size_ = 0;
};

// Panels [panel_begin, panel_end) of B[pc:pc+kc, jc:jc+nc] cut into panels
// of kNr columns: out[panel*kc*kNr + p*kNr + j].
template <class Tile>
void pack_b(MatrixRef<const float> b, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int64_t panel_begin,
            int64_t panel_end, float* out) {
    constexpr int64_t kNr = Tile::kNr;
    // B's rows contiguous: the full panels row by row, so that each row of
    // B is read once from start to end.
    if (b.col_stride == 1) {
        const int64_t full_end = std::min(panel_end, nc / kNr);
        if (full_end > panel_begin) {
            for (int64_t p = 0; p < kc; ++p) {
                const float* src = &b.at(pc + p, jc);
                for (int64_t panel = panel_begin; panel < full_end; ++panel)
                    std::memcpy(out + panel * kc * kNr + p * kNr, src + panel * kNr, kNr * sizeof(float));
            }
            panel_begin = full_end;
        }
    }
    for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
        const int64_t j0 = jc + panel * kNr, cols = std::min(kNr, nc - panel * kNr);
        float* dst = out + panel * kc * kNr;
        if (b.row_stride == 1 && b.col_stride != 1 && cols == kNr) {
            Tile::pack_b_panel_transposed(b, pc, kc, j0, dst);
            continue;
        }
        for (int64_t p = 0; p < kc; ++p) {
            const float* src = &b.at(pc + p, j0);
            if (b.col_stride == 1 && cols == kNr) {
                std::memcpy(dst + p * kNr, src, kNr * sizeof(float));
            } else {
                for (int64_t j = 0; j < cols; ++j) dst[p * kNr + j] = src[j * b.col_stride];
                for (int64_t j = cols; j < kNr; ++j) dst[p * kNr + j] = 0.0f;
            }
        }
    }
}

// A[ic:ic+mc, pc:pc+kc] as panels of kMr rows: out[panel*kc*kMr + p*kMr + i].
template <class Tile>
void pack_a(MatrixRef<const float> a, int64_t ic, int64_t mc, int64_t pc, int64_t kc, float* out) {
    constexpr int64_t kMr = Tile::kMr;
    for (int64_t panel = 0; panel * kMr < mc; ++panel) {
        const int64_t i0 = ic + panel * kMr, rows = std::min(kMr, mc - panel * kMr);
        float* dst = out + panel * kc * kMr;
        if (rows == kMr && (a.col_stride == 1 || a.row_stride == 1)) {
            Tile::pack_a_panel(a, i0, pc, kc, dst);
            continue;
        }
        for (int64_t p = 0; p < kc; ++p) {
            for (int64_t i = 0; i < rows; ++i) dst[p * kMr + i] = a.at(i0 + i, pc + p);
            for (int64_t i = rows; i < kMr; ++i) dst[p * kMr + i] = 0.0f;
        }
    }
}

// One tile of C, row i of A at a[i] (elements acs apart). Full tiles of a
// row-major C go straight to the kernel; edge tiles (and strided C) go
// through a local tile, of which only the valid part is read and written back.
template <class Tile>
void tile(int64_t kc, const float* const a[Tile::kMr], int64_t acs, const float* bp, MatrixRef<float> c, int64_t i0,
          int64_t j0, int64_t rows, int64_t cols, bool add) {
    constexpr int64_t kMr = Tile::kMr, kNr = Tile::kNr;
    if (rows == kMr && cols == kNr && c.col_stride == 1) {
        Tile::kernel(kc, a, acs, bp, &c.at(i0, j0), c.row_stride, add);
        return;
    }
    alignas(64) float local[kMr * kNr] = {};
    if (add)
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) local[i * kNr + j] = c.at(i0 + i, j0 + j);
    Tile::kernel(kc, a, acs, bp, local, kNr, add);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) c.at(i0 + i, j0 + j) = local[i * kNr + j];
}

// Asks the cache for the tile of C at (i0, j0), rows x cols, ahead of the
// kernel that will add to it. A kernel that adds to C loads the tile
// before its first multiply-add, and everything after waits for those
// loads. Where the tile was last written by the other core (the second
// thread continuing a Linear's dW over its own tokens, Note [A Linear's
// gradients on two threads] in gemm.cpp) that is a trip to the other core's
// cache for each tile, hundreds of nanoseconds when the two are far apart
// (docs/performance.md); asked for one tile ahead, the lines arrive while
// the kernel computes the tile before. Only a hint: no bit changes.
inline void prefetch_tile(MatrixRef<float> c, int64_t i0, int64_t j0, int64_t rows, int64_t cols) {
    if (c.col_stride != 1) return;
    for (int64_t i = 0; i < rows; ++i) {
        const float* row = &c.at(i0 + i, j0);
        // A line every 16 floats (64 bytes), and the row's last element:
        // a row that starts inside a line ends inside one more.
        for (int64_t j = 0; j < cols; j += 16) __builtin_prefetch(row + j);
        __builtin_prefetch(row + cols - 1);
    }
}

// C's rows [kMr rp_begin, kMr rp_end) and kNr-column panels [jp_begin,
// jp_end) of one (jc, pc) block, B's block packed at bp. A is packed kMc
// rows at a time into this thread's scratch; then for each panel of B (in
// L1) the kernel runs down the packed rows (in L2).
//
// Packing A pays when the kernel reads each packed row many times, once per
// panel of B. With kInPlacePanels panels or fewer (C at most 128 or 256
// columns wide, such as lm_head's 65) the copy costs more than it saves,
// and the kernel reads A where it lies instead, provided its rows or its
// columns are contiguous.
template <class Tile>
void block_rows(MatrixRef<const float> a, MatrixRef<float> c, const float* bp, int64_t pc, int64_t kc, int64_t jc,
                int64_t nc, int64_t rp_begin, int64_t rp_end, int64_t jp_begin, int64_t jp_end, bool add) {
    constexpr int64_t kMr = Tile::kMr, kNr = Tile::kNr, kMc = Tile::kMc;
    static thread_local Scratch a_scratch;
    const bool in_place = reads_a_in_place(a, jp_end - jp_begin);
    float* ap = in_place ? nullptr : a_scratch.get(static_cast<size_t>(kMc * kc));
    const int64_t row_end = std::min(c.rows, rp_end * kMr);
    for (int64_t ic = rp_begin * kMr; ic < row_end; ic += kMc) {
        const int64_t mc = std::min(kMc, row_end - ic);
        if (!in_place) pack_a<Tile>(a, ic, mc, pc, kc, ap);
        for (int64_t jp = jp_begin; jp < jp_end; ++jp) {
            const int64_t j0 = jp * kNr, cols = std::min(kNr, nc - j0);
            if constexpr (Tile::kThinEdges) {
                if (in_place && cols <= kEdgeCols) {
                    Tile::edge_columns({&a.at(ic, pc), mc, kc, a.row_stride, a.col_stride}, bp + jp * kc * kNr, kNr,
                                       {&c.at(ic, jc + j0), mc, cols, c.row_stride, c.col_stride}, add);
                    continue;
                }
            }
            for (int64_t ip = 0; ip * kMr < mc; ++ip) {
                const int64_t rows = std::min(kMr, mc - ip * kMr);
                const float* arow[kMr];
                int64_t acs = kMr;
                if (in_place) {
                    clamped_rows<kMr>(a, ic + ip * kMr, rows, pc, arow);
                    acs = a.col_stride;
                } else {
                    for (int64_t r = 0; r < kMr; ++r) arow[r] = ap + ip * kc * kMr + r;
                }
                // The next tile: down this panel, else the first of the next
                // panel, else the first of the next block of rows.
                if (add) {
                    if ((ip + 1) * kMr < mc)
                        prefetch_tile(c, ic + (ip + 1) * kMr, jc + j0, std::min(kMr, mc - (ip + 1) * kMr), cols);
                    else if (jp + 1 < jp_end)
                        prefetch_tile(c, ic, jc + j0 + kNr, std::min(kMr, mc), std::min(kNr, nc - j0 - kNr));
                    else if (ic + kMc < row_end)
                        prefetch_tile(c, ic + kMc, jc + jp_begin * kNr, std::min(kMr, row_end - ic - kMc),
                                      std::min(kNr, nc - jp_begin * kNr));
                }
                tile<Tile>(kc, arow, acs, bp + jp * kc * kNr, c, ic + ip * kMr, jc + j0, rows, cols, add);
            }
        }
    }
}

// Tiles [begin, end) of one (jc, pc) block, numbered row panel by row
// panel (tile = row panel * n_panels + column panel): the rest of a row
// panel, whole row panels, then the start of one.
template <class Tile>
void block_tiles(MatrixRef<const float> a, MatrixRef<float> c, const float* bp, int64_t pc, int64_t kc, int64_t jc,
                 int64_t nc, int64_t n_panels, int64_t begin, int64_t end, bool add) {
    int64_t rp = begin / n_panels;
    if (const int64_t jp = begin % n_panels; jp != 0) {
        const int64_t jp_end = std::min(n_panels, jp + (end - begin));
        block_rows<Tile>(a, c, bp, pc, kc, jc, nc, rp, rp + 1, jp, jp_end, add);
        begin += jp_end - jp;
        ++rp;
    }
    if (const int64_t whole = (end - begin) / n_panels; whole > 0) {
        block_rows<Tile>(a, c, bp, pc, kc, jc, nc, rp, rp + whole, 0, n_panels, add);
        begin += whole * n_panels;
        rp += whole;
    }
    if (begin < end) block_rows<Tile>(a, c, bp, pc, kc, jc, nc, rp, rp + 1, 0, end - begin, add);
}

// The product as one team: threads share each packed block of B and split
// C's tiles (the loop nest drawn at the top), or the calling thread alone.
template <class Tile>
void gemm_packed_team(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    constexpr int64_t kMr = Tile::kMr, kNr = Tile::kNr;
    const int64_t m = c.rows, n = c.cols, k = a.cols;
    const int64_t row_panels = (m + kMr - 1) / kMr;
    // One packed block of B, which every thread reads: the calling thread's
    // scratch, sized for the largest block before the threads start.
    static thread_local Scratch b_scratch;
    const int64_t widest = (std::min(kNc, n) + kNr - 1) / kNr, deepest = std::min(std::max(Tile::kKc, kKcInPlace), k);
    float* bp = b_scratch.get(static_cast<size_t>(widest * deepest * kNr));
    // One team of threads for the whole product (Note [A team of threads] in
    // core/loops/parallel.h): for each block, they pack B's panels side by
    // side, wait for each other, then each computes its share of C's tiles.
    parallel_team(m * n * k > kGemmParallelWork, [&](Team& team) {
        bool first = true;
        for (int64_t jc = 0; jc < n; jc += kNc) {
            const int64_t nc = std::min(kNc, n - jc);
            const int64_t n_panels = (nc + kNr - 1) / kNr;
            // block_rows reads A in place under the same rule (per thread's
            // share of panels, which is never wider than n_panels).
            const bool a_in_place = reads_a_in_place(a, n_panels);
            const int64_t kc_block = a_in_place ? kKcInPlace : Tile::kKc;
            for (int64_t pc = 0; pc < k; pc += kc_block) {
                const int64_t kc = std::min(kc_block, k - pc);
                if (!first) team.barrier(); // everyone is done with the last block's panels
                first = false;
                // Threads pack B's panels side by side (a panel is a kc x kNr copy).
                team.run([&] {
                    const auto [begin, end] = team.share(0, n_panels);
                    pack_b<Tile>(b, pc, kc, jc, nc, begin, end, bp);
                });
                team.barrier(); // every panel is packed
                // The first k block starts C from zero (or from C when
                // accumulating); later blocks add to what earlier ones left.
                const bool add = accumulate || pc > 0;
                // Threads split C's tiles, ceil(tiles / threads) each, taken
                // row panel by row panel (block_tiles): shares differ by one
                // tile at most, whatever C's shape (docs/matmul.md, "Threads").
                team.run([&] {
                    const auto [begin, end] = team.share(0, row_panels * n_panels);
                    block_tiles<Tile>(a, c, bp, pc, kc, jc, nc, n_panels, begin, end, add);
                });
            }
        }
    });
}

// The buffer gemm_packed_pieces packs all of B into, one per thread and
// tile, and whether a product in pieces on this thread is using it.
template <class Tile>
struct PiecesScratch {
    static inline thread_local Scratch buffer;
    static inline thread_local bool in_use = false;
};

// The rows of C a thread takes piece by piece (`next(rows)` gives the
// next rows [begin, end), false when there are none): all of B packed once
// into this thread's scratch, every (jc, pc) block one after the other,
// then each piece of rows over every block in turn. For the products two
// threads share by taking work from each other's end (Note [Taking work
// from the other end] in core/loops/parallel.h): each thread packs B once
// however many pieces it takes. Each element of C sums its k as the team
// does: the same bits, whichever thread computes which rows.
template <class Tile, class Next>
void gemm_packed_pieces(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate,
                        const Next& next) {
    constexpr int64_t kMr = Tile::kMr, kNr = Tile::kNr;
    const int64_t n = c.cols, k = a.cols;
    // The depth of a block, as gemm_packed_team picks it for each block of columns.
    const auto depth = [&](int64_t n_panels) { return reads_a_in_place(a, n_panels) ? kKcInPlace : Tile::kKc; };
    WorkRange::Range rows;
    if (!next(rows)) return; // nothing to do: nothing to pack
    // Every block of columns padded to whole panels (kNc is not a multiple
    // of every tile's kNr: the portable tile's is 12 on arm64).
    int64_t panels = 0;
    for (int64_t jc = 0; jc < n; jc += kNc) panels += (std::min(kNc, n - jc) + kNr - 1) / kNr;
    // This thread's scratch for the tile, unless a product that next() runs
    // on this thread (a Linear's dW, between two pieces of its dx) is
    // itself in pieces: that one takes a scratch of its own, so that it
    // cannot overwrite or free the B the outer product is still reading.
    using Shared = PiecesScratch<Tile>;
    Scratch nested;
    const bool outermost = !Shared::in_use;
    float* bp = (outermost ? Shared::buffer : nested).get(static_cast<size_t>(panels * kNr * k));
    struct InUse {
        bool outermost;
        explicit InUse(bool o) : outermost(o) {
            if (outermost) Shared::in_use = true;
        }
        ~InUse() {
            if (outermost) Shared::in_use = false;
        }
    } in_use(outermost);
    for (int64_t jc = 0, at = 0; jc < n; jc += kNc) {
        const int64_t nc = std::min(kNc, n - jc), n_panels = (nc + kNr - 1) / kNr, kc_block = depth(n_panels);
        for (int64_t pc = 0; pc < k; pc += kc_block) {
            const int64_t kc = std::min(kc_block, k - pc);
            pack_b<Tile>(b, pc, kc, jc, nc, 0, n_panels, bp + at);
            at += n_panels * kNr * kc;
        }
    }
    do {
        // These rows of A and C, as matrices of their own.
        const MatrixRef<const float> ap{&a.at(rows.begin, 0), rows.end - rows.begin, k, a.row_stride, a.col_stride};
        const MatrixRef<float> cp{&c.at(rows.begin, 0), rows.end - rows.begin, n, c.row_stride, c.col_stride};
        const int64_t row_panels = (cp.rows + kMr - 1) / kMr;
        for (int64_t jc = 0, at = 0; jc < n; jc += kNc) {
            const int64_t nc = std::min(kNc, n - jc), n_panels = (nc + kNr - 1) / kNr, kc_block = depth(n_panels);
            for (int64_t pc = 0; pc < k; pc += kc_block) {
                const int64_t kc = std::min(kc_block, k - pc);
                block_rows<Tile>(ap, cp, bp + at, pc, kc, jc, nc, 0, row_panels, 0, n_panels, accumulate || pc > 0);
                at += n_panels * kNr * kc;
            }
        }
    } while (next(rows));
}

// Note [Two halves or one team]. On two threads a product is cut in two
// halves, each a whole product on one thread with nothing shared: C's
// first rows from A's first rows and all of B, or C's first columns from
// all of A and B's first columns. Each thread then packs its own copy of
// the operand both halves need, and never waits for the other or reads
// what the other packed. One team instead packs each block of B once
// between the two threads, but meets at two barriers per block of k, and
// each thread reads the half of every packed block the other core wrote; a
// thread the system delays holds up the other at each barrier. The second
// copy is work the team does not do: at the macbook preset packing is about
// 3% of a step on one thread (perf), and each thread now packs about twice
// its former share. The cut runs across C's longer side (so the copy is of
// the smaller operand) at a whole number of tiles, the first half taking
// the odd one; a side of fewer than kHalvesTiles tiles would leave the
// halves too uneven (3 tiles: 2 and 1), so then the other side is cut, or
// when neither has enough, the team shares the tiles. Halves by rows (B
// up to kPiecesFloats) are WorkRanges of row tiles: each thread packs all
// of B once and takes its own half piece by piece, then pieces from the
// end of the other's (gemm_packed_pieces, Note [Taking work from the other
// end] in core/loops/parallel.h): in 300 macbook preset steps the
// threads' waits at the end of these products fell from 6.5% of their
// time in them to 1-2%.
// Measured on a 2-core Zen 4, 2 threads, each product's B freshly written
// by both threads, medians of four alternating runs (GFLOP/s, team ->
// halves): the macbook preset's 13 products +0.4% to +14% (dW = dy^T @ x
// at 128 x 768 x 128: 168 -> 192; at 128 x 768 x 512: 174 -> 197),
// 192^3 to 512^3 +0.6% to +7%, 1024^3 -0.9%. More threads keep the team:
// each thread would copy the operand once more, and no machine here had
// more cores to measure it on. Each element of C sums its k in the same
// order either way: the same bits.
//
// Not taken: cutting by columns wherever half of C's columns lets A be
// read in place (so that neither half copies what the other copies). On
// the products alone that was 0.7% to 2.2% faster, but a cut by rows keeps
// the rows of tokens where the element-wise steps before and after it
// (split by rows too) left them, in the same core's cache; by columns each
// thread reads every row, half of them from the other core. Whole
// macbook runs at two threads on a Zen 4 were 1% faster without it while
// a cache line took 55-60 ns from one vCPU to the other and back (a
// scratch ping-pong), and 5% faster in a pair of runs while it took 320
// ns (the host placing the two vCPUs far apart; docs/performance.md).
inline constexpr int64_t kHalvesTiles = 8;
// Halves by rows take work from each other's end (Note [Taking work from
// the other end]) when all of B packed is at most kPiecesFloats
// (gemm_packed.h): each thread packs all of B once (gemm_packed_pieces),
// in pieces of at least kLeastTiles row tiles.
inline constexpr int64_t kLeastTiles = 2;

// How many products have been cut in halves since the program started, and
// how many of them by columns (for the tests, which check that the halves
// ran, and which way).
inline std::atomic<int64_t> halves_run{0}, column_halves_run{0};

template <class Tile>
void gemm_packed(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    constexpr int64_t kMr = Tile::kMr, kNr = Tile::kNr;
    const int64_t m = c.rows, n = c.cols, k = a.cols;
    const int64_t row_tiles = (m + kMr - 1) / kMr, col_tiles = (n + kNr - 1) / kNr;
    bool by_rows = m >= n;
    if ((by_rows ? row_tiles : col_tiles) < kHalvesTiles) by_rows = !by_rows;
    const int64_t tiles = by_rows ? row_tiles : col_tiles;
    if (get_num_threads() != 2 || m * n * k <= kGemmParallelWork || tiles < kHalvesTiles) {
        gemm_packed_team<Tile>(a, b, c, accumulate);
        return;
    }
    const int64_t unit = by_rows ? kMr : kNr, side = by_rows ? m : n;
    const int64_t cut = (tiles + 1) / 2 * unit; // < side, since tiles >= 2
    // Halves by rows whose B fits in kPiecesFloats take work from each
    // other's end: each thread's half is a WorkRange of row tiles.
    const bool pieces = by_rows && (n + kNr - 1) / kNr * kNr * k <= kPiecesFloats;
    WorkRange halves[2] = {{0, (tiles + 1) / 2}, {(tiles + 1) / 2, tiles}};
    parallel_for(0, 2, 1, [&](int64_t begin, int64_t end) {
        if (end - begin == 2) { // the loop did not split (Note [Threads on a busy machine]): all of it here
            gemm_packed_team<Tile>(a, b, c, accumulate);
            return;
        }
        if (begin == 0) {
            halves_run.fetch_add(1, std::memory_order_relaxed);
            if (!by_rows) column_halves_run.fetch_add(1, std::memory_order_relaxed);
        }
        if (pieces) {
            WorkRange& own = halves[begin];
            WorkRange& other = halves[1 - begin];
            gemm_packed_pieces<Tile>(a, b, c, accumulate, [&](WorkRange::Range& rows) {
                WorkRange::Range t;
                if (!own.take_front(kLeastTiles, t) && !other.take_back(kLeastTiles, t)) return false;
                rows = {t.begin * kMr, std::min(m, t.end * kMr)};
                return true;
            });
            return;
        }
        const int64_t from = begin == 0 ? 0 : cut, to = begin == 0 ? cut : side;
        if (by_rows)
            gemm_packed_team<Tile>({&a.at(from, 0), to - from, k, a.row_stride, a.col_stride}, b,
                                   {&c.at(from, 0), to - from, n, c.row_stride, c.col_stride}, accumulate);
        else
            gemm_packed_team<Tile>(a, {&b.at(0, from), k, to - from, b.row_stride, b.col_stride},
                                   {&c.at(0, from), m, to - from, c.row_stride, c.col_stride}, accumulate);
    });
}

} // namespace

} // namespace ember::internal
