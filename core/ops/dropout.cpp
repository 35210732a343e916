// dropout: zeroes each element with probability p and scales the rest by
// 1/(1-p), when training; the identity otherwise.
//
// The mask is drawn exactly as PyTorch's F.dropout draws it (bernoulli_ on
// the default generator, core/random/distributions.cpp), so the same seed
// gives the same masks, on PyTorch builds without MKL (docs/random.md). It is
// kept for the backward as bits, one per element: a 32nd of the float mask
// PyTorch keeps. Tests: tests/test_random.cpp (the masks against PyTorch's),
// tests/test_loss.cpp (the edge cases, the gradient).
#include "core/autograd/autograd.h"
#include "core/loops/map.h"
#include "core/ops/ops.h"
#include "core/random/fill.h"
#include "core/tensor/internal.h"

namespace ember {

using namespace internal;

namespace {

// out[i] = x[i] * (bit i of keep ? kept : 0) over n contiguous elements: the
// product PyTorch computes with its float mask, so the same bits (a dropped
// negative element is -0.0, a dropped NaN stays NaN). Eight elements at a
// time, their mask looked up by the byte of bits that covers them.
template <typename T>
void apply_mask(const T* x, const uint64_t* keep, int64_t n, T kept, T* out) {
    T table[256][8]; // table[byte][i] = bit i of byte ? kept : 0
    for (int b = 0; b < 256; ++b)
        for (int i = 0; i < 8; ++i) table[b][i] = (b >> i) & 1 ? kept : T(0);
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

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
    if (!(p >= 0.0 && p <= 1.0))
        fail<ValueError>("dropout", "probability must be between 0 and 1, got ", p, " (input ", x.shape(), ")");
    check_floating(x, "dropout");
    // PyTorch draws nothing in these cases, and neither do we.
    if (!training || p == 0.0 || x.numel() == 0) return x;
    if (p == 1.0) return mul(x, 0);
    // PyTorch: noise = bernoulli(1 - p), noise.div_(1 - p), out = x * noise:
    // one draw per element in row-major order, a kept element multiplied by
    // 1 / (1 - p) computed in the tensor's dtype (1 / float(1 - p) for float32).
    const int64_t n = x.numel();
    Tensor keep = empty({(n + 63) / 64}, kInt64); // bit i: element i kept
    auto* words = reinterpret_cast<uint64_t*>(keep.data_ptr<int64_t>());
    bernoulli_bits(words, n, 1.0 - p, generator_or_default(generator));
    const double kept =
        x.dtype() == kFloat32 ? static_cast<double>(1.0f / static_cast<float>(1.0 - p)) : 1.0 / (1.0 - p);
    Tensor xc = contiguous_data(x);
    Tensor out = empty_for("dropout", x.shape(), x.dtype());
    dispatch_floating(x.dtype(), "dropout", [&]<typename T>(TypeTag<T>) {
        apply_mask(data_of<T>(xc), words, n, static_cast<T>(kept), out.data_ptr<T>());
    });
    // backward: out = x * noise, so dx = dout * noise. The node takes the
    // name PyTorch 1.13 records for that product on a CPU.
    if (needs_grad(x))
        attach(out, "MulBackward0", {x}, [keep, kept, n](const Tensor& dout) -> Grads {
            Tensor g = contiguous_data(dout);
            Tensor dx = empty(g.shape(), g.dtype());
            dispatch_floating(g.dtype(), "dropout", [&]<typename T>(TypeTag<T>) {
                apply_mask(data_of<T>(g), reinterpret_cast<const uint64_t*>(keep.data_ptr<int64_t>()), n,
                           static_cast<T>(kept), dx.data_ptr<T>());
            });
            return {dx};
        });
    return out;
}

} // namespace ember
