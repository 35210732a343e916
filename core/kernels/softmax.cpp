// Softmax rows, fast (fast::softmax_last_dim, fast::scaled_masked_softmax_*,
// dispatch.h): the row functions of core/ops/softmax.h, which define the
// results, and for short rows the same operations on several rows at once,
// so the two give the same bits. Tests: tests/test_kernels.cpp.
//
// Short rows (attention's, T = 8 at the tiny size) are exponentiated several
// rows at a time through one buffer, so the vectorised loop runs long enough
// to pay for itself; rows are scaled and masked in blocks that stay in L1;
// the mask's rows are found by stepping through the period of its broadcast
// pattern instead of dividing per row; and the loops have AVX2 copies picked
// at run time (vectorize.h; flatten inlines the shared row functions into
// each copy).
#include "core/ops/softmax.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"
#include "core/loops/iter.h"
#include "core/loops/parallel.h"

namespace ember::internal {

namespace {

// softmax over `rows` contiguous rows of n (out may be x). Rows longer than
// half the buffer go one at a time; shorter ones are exponentiated a block
// of rows at a time, in one loop over the buffer.
template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void softmax_rows(const T* x, T* out, int64_t rows, int64_t n) {
    constexpr int64_t kBuffer = 256;
    if (n > kBuffer / 2) {
        for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * n, out + r * n, 1, n, false);
        return;
    }
    // softmax_row's operations on a block of rows: each row's max; x - max
    // and its exponential for the whole block in one loop; each row's sum in
    // double, and the product with 1 / sum.
    const int64_t block = kBuffer / n;
    T e[kBuffer], m[kBuffer];
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
        const int64_t nr = std::min(block, rows - r0);
        const T* xb = x + r0 * n;
        T* ob = out + r0 * n;
        for (int64_t r = 0; r < nr; ++r) m[r] = row_max(xb + r * n, 1, n);
        for (int64_t r = 0; r < nr; ++r)
            for (int64_t i = 0; i < n; ++i) e[r * n + i] = xb[r * n + i] - m[r];
        for (int64_t j = 0; j < nr * n; ++j) e[j] = exponential(e[j]);
        for (int64_t r = 0; r < nr; ++r) {
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += e[r * n + i];
            const T scale = T(1) / static_cast<T>(sum);
            for (int64_t i = 0; i < n; ++i) ob[r * n + i] = e[r * n + i] * scale;
        }
    }
}

// The rows of a mask already expanded to x's shape (undefined: nothing is
// masked). Row r's index splits over the leading dims like a multi-digit
// number; broadcast dims (stride 0) move nothing, so the pattern of mask
// rows repeats with the span of the outermost dim that does move: for
// attention's (T,T) mask expanded to (B,NH,T,T), every T rows. Where each
// row of one period starts is worked out once; the loops then step through
// the period instead of dividing per row (which, per row of 8, would cost
// as much as the row's arithmetic).
struct MaskRows {
    const bool* data = nullptr;
    int64_t step = 0;             // stride along a row
    std::vector<int64_t> offsets; // row r starts at data + offsets[r % period]

    explicit MaskRows(const Tensor& m) {
        if (!m.defined()) return;
        data = m.data_ptr<bool>();
        step = m.strides().back();
        // The period: the rows that the outermost leading dim that moves
        // spans, with the dims inside it; the dims outside it are broadcast.
        const int64_t lead = m.dim() - 1;
        int64_t period = 1, rows = 1, outer = lead;
        for (int64_t d = lead - 1; d >= 0; --d) {
            rows *= m.shape()[d];
            if (m.strides()[d] != 0) period = rows, outer = d;
        }
        const std::span<const int64_t> shape(m.shape().data() + outer, lead - outer);
        const std::span<const int64_t> strides(m.strides().data() + outer, lead - outer);
        offsets.resize(static_cast<size_t>(period));
        for (int64_t r = 0; r < period; ++r) offsets[r] = offset_of(r, shape, strides);
    }
    int64_t period() const { return static_cast<int64_t>(offsets.size()); }

    // Calls f(r, mask_row) for the rows r in [begin, end); mask_row is null
    // when nothing is masked.
    template <typename F>
    void for_rows(int64_t begin, int64_t end, const F& f) const {
        if (!data) {
            for (int64_t r = begin; r < end; ++r) f(r, static_cast<const bool*>(nullptr));
            return;
        }
        int64_t j = begin % period();
        for (int64_t r = begin; r < end; ++r) {
            f(r, data + offsets[j]);
            if (++j == period()) j = 0;
        }
    }
};

template <typename T>
void masked_forward(const T* x, T* y, int64_t rows, int64_t n, const Tensor& mask, T s) {
    const MaskRows masks(mask);
    const int64_t block = std::max<int64_t>(1, 1024 / n); // rows filled, then softmaxed, while in L1
    constexpr T kMasked = -std::numeric_limits<T>::infinity();
    parallel_for(0, rows, grain_for(n), [&](int64_t b, int64_t e) {
        for (int64_t r0 = b; r0 < e; r0 += block) {
            const int64_t r1 = std::min(e, r0 + block);
            // Scale the block in one loop, then mask row by row.
            const T* xb = x + r0 * n;
            T* yb = y + r0 * n;
            const int64_t len = (r1 - r0) * n;
            for (int64_t j = 0; j < len; ++j) yb[j] = xb[j] * s;
            if (masks.data)
                masks.for_rows(r0, r1, [&](int64_t r, const bool* mr) {
                    T* yr = y + r * n;
                    for (int64_t i = 0; i < n; ++i) yr[i] = mr[i * masks.step] ? kMasked : yr[i];
                });
            softmax_rows(yb, yb, r1 - r0, n);
        }
    });
}

// The backward over rows [begin, end), compiled for AVX2 too (the loops must
// sit in the marked function itself: a lambda handed to parallel_for would
// be compiled for the baseline only).
template <typename T>
[[gnu::flatten]] EMBER_VECTOR_CLONES void masked_backward_rows(const T* y, const T* dy, T* dx, int64_t begin,
                                                               int64_t end, int64_t n, const MaskRows& masks, T s) {
    masks.for_rows(begin, end, [&](int64_t r, const bool* mr) {
        scaled_masked_softmax_backward_row(y + r * n, dy + r * n, dx + r * n, n, mr, masks.step, s);
    });
}

template <typename T>
void masked_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t n, const Tensor& mask, T s) {
    const MaskRows masks(mask);
    parallel_for(0, rows, grain_for(n),
                 [&](int64_t b, int64_t e) { masked_backward_rows(y, dy, dx, b, e, n, masks, s); });
}

} // namespace

template <typename T>
void fast::softmax_last_dim(const T* x, T* out, int64_t rows, int64_t n) {
    parallel_for(0, rows, grain_for(n), [&](int64_t b, int64_t e) { softmax_rows(x + b * n, out + b * n, e - b, n); });
}
template void fast::softmax_last_dim(const float*, float*, int64_t, int64_t);
template void fast::softmax_last_dim(const double*, double*, int64_t, int64_t);

template <typename T>
void fast::scaled_masked_softmax_forward(const T* x, T* y, int64_t rows, int64_t n, const Tensor& mask, T s) {
    masked_forward(x, y, rows, n, mask, s);
}
template void fast::scaled_masked_softmax_forward(const float*, float*, int64_t, int64_t, const Tensor&, float);
template void fast::scaled_masked_softmax_forward(const double*, double*, int64_t, int64_t, const Tensor&, double);

template <typename T>
void fast::scaled_masked_softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t n, const Tensor& mask,
                                          T s) {
    masked_backward(y, dy, dx, rows, n, mask, s);
}
template void fast::scaled_masked_softmax_backward(const float*, const float*, float*, int64_t, int64_t, const Tensor&,
                                                   float);
template void fast::scaled_masked_softmax_backward(const double*, const double*, double*, int64_t, int64_t,
                                                   const Tensor&, double);

} // namespace ember::internal
