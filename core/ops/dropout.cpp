// dropout: zeroes each element with probability p and scales the rest by
// 1/(1-p), when training; the identity otherwise.
//
// Its definition is PyTorch's F.dropout, in ember's ops: a mask drawn with
// bernoulli_ on the default generator (core/random/distributions.cpp),
// divided by 1 - p, multiplied into x; so the same seed gives the same
// masks, on PyTorch builds without MKL (docs/random.md), and mul's backward
// gives the gradient. With the fast kernels on, core/kernels/dropout.cpp
// computes the same bits from a mask kept as bits, a 32nd of the float
// mask's memory. Tests: tests/test_random.cpp (the masks against
// PyTorch's), tests/test_loss.cpp (the edge cases), tests/test_kernels.cpp
// (the fast path against this definition).
#include "core/kernels/dispatch.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"

namespace ember {

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
    if (!(p >= 0.0 && p <= 1.0))
        fail<ValueError>("dropout", "probability must be between 0 and 1, got ", p, " (input ", x.shape(), ")");
    internal::check_floating(x, "dropout");
    // PyTorch draws nothing in these cases, and neither do we.
    if (!training || p == 0.0 || x.numel() == 0) return x;
    if (p == 1.0) return mul(x, 0);
    if constexpr (internal::kFastKernelsBuilt) {
        if (internal::use_fast_kernels()) return internal::fast::dropout(x, p, generator);
    }
    // PyTorch: noise = bernoulli(1 - p), noise.div_(1 - p), out = x * noise:
    // one draw per element in x's row-major order, a kept element
    // multiplied by 1 / (1 - p) computed in the tensor's dtype (the scalar
    // is rounded to float32 first for float32, as every op with a number
    // does). mul records MulBackward0, PyTorch 1.13's node for it.
    Tensor noise = empty(x.shape(), x.dtype());
    noise.bernoulli_(1.0 - p, generator);
    noise.div_(1.0 - p);
    return mul(x, noise);
}

} // namespace ember
