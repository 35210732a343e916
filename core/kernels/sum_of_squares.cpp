// clip_grad_norm_'s sums of squares, fast (fast::sums_of_squares,
// dispatch.h). The definition (sum_of_squares in nn/optim.cpp) adds one
// gradient's squares in double in the order sum() adds its elements: sum()
// cuts a tensor into chunks of internal::kChunk elements, adds each chunk's
// squares from 0 in increasing index, then the chunks' sums first to last.
// Each addition waits for the one before it (about 4 cycles), so one chunk
// at a time leaves the core mostly idle. Here a thread runs four chunks
// side by side in one loop, four independent chains, each with exactly its
// own additions in its own order, and threads share the chunks of all the
// gradients: the same bits. On the macbook preset's 0.8 M gradients (a
// 2-core Zen 4): 0.67 ms a step down to 0.34 ms on one thread, 0.41 ms to
// 0.18 ms on two. Tests: tests/test_kernels.cpp, tests/test_optim.cpp.
#include <algorithm>
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/loops/parallel.h"
#include "core/ops/reduce.h"
#include "core/tensor/internal.h"

namespace ember::internal {

namespace {

// out[c] = the sum of chunk c's squares, for chunks [first, first + count)
// of the n elements at x.
template <typename T>
void chunk_sums(const T* x, int64_t n, int64_t first, int64_t count, double* out) {
    int64_t c = first;
    for (; c + 4 <= first + count && (c + 4) * kChunk <= n; c += 4) {
        const T* p = x + c * kChunk;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int64_t i = 0; i < kChunk; ++i) {
            const double v0 = p[i], v1 = p[i + kChunk], v2 = p[i + 2 * kChunk], v3 = p[i + 3 * kChunk];
            a0 = a0 + v0 * v0, a1 = a1 + v1 * v1, a2 = a2 + v2 * v2, a3 = a3 + v3 * v3;
        }
        out[c] = a0, out[c + 1] = a1, out[c + 2] = a2, out[c + 3] = a3;
    }
    for (; c < first + count; ++c) {
        const T* p = x + c * kChunk;
        const int64_t len = std::min(kChunk, n - c * kChunk);
        double acc = 0;
        for (int64_t i = 0; i < len; ++i) acc = acc + double(p[i]) * double(p[i]);
        out[c] = acc;
    }
}

} // namespace

void fast::sums_of_squares(const std::vector<Tensor>& grads, std::vector<double>& total) {
    // Work items of up to four chunks of one gradient.
    struct Item {
        size_t grad;
        int64_t first, count;
    };
    std::vector<Item> items;
    std::vector<std::vector<double>> partial(grads.size());
    for (size_t i = 0; i < grads.size(); ++i) {
        const Tensor& g = grads[i];
        if (!g.defined() || !g.is_contiguous()) continue;
        const int64_t chunks = (g.numel() + kChunk - 1) / kChunk;
        partial[i].assign(static_cast<size_t>(chunks), 0.0);
        for (int64_t c = 0; c < chunks; c += 4) items.push_back({i, c, std::min<int64_t>(4, chunks - c)});
    }
    parallel_for(0, static_cast<int64_t>(items.size()), 1, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
            const Item& it = items[static_cast<size_t>(k)];
            const Tensor& g = grads[it.grad];
            dispatch_floating(g.dtype(), "clip_grad_norm_", [&]<typename T>(TypeTag<T>) {
                chunk_sums(data_of<T>(g), g.numel(), it.first, it.count, partial[it.grad].data());
            });
        }
    });
    for (size_t i = 0; i < grads.size(); ++i) {
        if (partial[i].empty()) continue;
        double acc = partial[i][0];
        for (size_t c = 1; c < partial[i].size(); ++c) acc = acc + partial[i][c];
        total[i] = acc;
    }
}

} // namespace ember::internal
