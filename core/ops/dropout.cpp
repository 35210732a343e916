// dropout: zeroes each element with probability p and scales the rest by
// 1/(1-p), when training; the identity otherwise.
//
// The mask is drawn exactly as PyTorch's F.dropout draws it (bernoulli_ on
// the default generator, core/random/distributions.cpp), so the same seed
// gives the same masks, on PyTorch builds without MKL (docs/random.md).
// Tests: tests/test_random.cpp
// (the masks against PyTorch's), tests/test_loss.cpp (the edge cases).
#include "core/ops/ops.h"
#include "core/random/fill.h"

namespace ember {

using namespace internal;

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
    if (!(p >= 0.0 && p <= 1.0))
        fail<ValueError>("dropout", "probability must be between 0 and 1, got ", p, " (input ", x.shape(), ")");
    check_floating(x, "dropout");
    // PyTorch draws nothing in these cases, and neither do we.
    if (!training || p == 0.0 || x.numel() == 0) return x;
    if (p == 1.0) return mul(x, 0);
    // PyTorch: noise = bernoulli(1 - p), noise.div_(1 - p), out = x * noise.
    // The division is done in the tensor's dtype, 1 / float(1 - p) for a
    // kept float32 element and 0 for a dropped one; ember draws the mask with
    // those values in one pass (the same draws, the same bits). The backward
    // dx = dout * noise comes from mul.
    const double kept =
        x.dtype() == kFloat32 ? static_cast<double>(1.0f / static_cast<float>(1.0 - p)) : 1.0 / (1.0 - p);
    Tensor noise = empty_for("dropout", x.shape(), x.dtype());
    bernoulli_fill(noise, 1.0 - p, kept, generator_or_default(generator));
    return mul(x, noise);
}

} // namespace ember
