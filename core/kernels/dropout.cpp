// Dropout, fast (fast::dropout, dispatch.h): the mask drawn straight into
// bits and kept as bits for the backward, and applied eight elements at a
// time through a table. The definition it replaces, x * (bernoulli(1 - p) /
// (1 - p)) in core/ops/dropout.cpp, gives the same bits forward and
// backward. Tests: tests/test_kernels.cpp.
#include "core/kernels/dropout.h"

#include <algorithm>

#include "core/autograd/autograd.h"
#include "core/kernels/bernoulli.h"
#include "core/kernels/dispatch.h"
#include "core/loops/map.h"
#include "core/loops/parallel.h"
#include "core/ops/ops.h"
#include "core/random/fill.h"

namespace ember::internal {

namespace {

// out[i] = x[i] * (bit i of keep ? scale : 0) over n contiguous elements:
// the product the definition computes with its float mask, so the same
// bits (a dropped negative element is -0.0, a dropped NaN stays NaN). Eight
// elements at a time, their mask looked up by the byte of bits that covers
// them.
template <typename T>
void apply_bits(const T* x, const uint64_t* keep, int64_t n, T scale, T* out) {
    T table[256][8]; // table[byte][i] = bit i of byte ? scale : 0
    for (int b = 0; b < 256; ++b)
        for (int i = 0; i < 8; ++i) table[b][i] = (b >> i) & 1 ? scale : T(0);
    const int64_t bytes = (n + 7) / 8;
    parallel_for(0, bytes, grain_for(8), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
            const T* mask = table[(keep[b / 8] >> (8 * (b % 8))) & 0xFF];
            const int64_t first = 8 * b, count = std::min<int64_t>(8, n - first);
            for (int64_t i = 0; i < count; ++i) out[first + i] = x[first + i] * mask[i];
        }
    });
}

} // namespace

DropoutBits draw_dropout_bits(int64_t n, double p, DType dtype, Generator* generator) {
    DropoutBits drop;
    drop.words = zeros({(n + 63) / 64}, kInt64);
    if (p < 1) { // p = 1 drops everything and, as F.dropout, draws nothing
        auto* words = reinterpret_cast<uint64_t*>(drop.words.data_ptr<int64_t>());
        Generator& gen = generator_or_default(generator);
        std::lock_guard lock(gen.mutex()); // this op's draws: one run of the stream
        bernoulli_bits(words, n, bernoulli_threshold(1.0 - p), gen);
    }
    drop.scale = dtype == kFloat32 ? static_cast<double>(1.0f / static_cast<float>(1.0 - p)) : 1.0 / (1.0 - p);
    return drop;
}

Tensor fast::dropout(const Tensor& x, double p, Generator* generator) {
    const int64_t n = x.numel();
    const DropoutBits drop = draw_dropout_bits(n, p, x.dtype(), generator);
    Tensor xc = contiguous_data(x);
    Tensor out = empty_for("dropout", x.shape(), x.dtype());
    dispatch_floating(x.dtype(), "dropout", [&]<typename T>(TypeTag<T>) {
        apply_bits(data_of<T>(xc), reinterpret_cast<const uint64_t*>(drop.words.data_ptr<int64_t>()), n,
                   static_cast<T>(drop.scale), out.data_ptr<T>());
    });
    // backward: out = x * noise, so dx = dout * noise. The node takes the
    // name PyTorch 1.13 records for that product on a CPU.
    if (needs_grad(x))
        attach(out, "MulBackward0", {x}, [drop, n](const Tensor& dout) -> Grads {
            Tensor g = contiguous_data(dout);
            Tensor dx = empty(g.shape(), g.dtype());
            dispatch_floating(g.dtype(), "dropout", [&]<typename T>(TypeTag<T>) {
                apply_bits(data_of<T>(g), reinterpret_cast<const uint64_t*>(drop.words.data_ptr<int64_t>()), n,
                           static_cast<T>(drop.scale), dx.data_ptr<T>());
            });
            return {dx};
        });
    return out;
}

} // namespace ember::internal
