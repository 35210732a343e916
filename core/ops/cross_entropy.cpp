// cross_entropy, fused with its log_softmax.
//
// cross_entropy(logits (N,C), targets (N)) = mean over the targets that are
// not ignore_index of -log softmax(logits[n])[targets[n]]. Fusing the two
// avoids materialising log-probabilities and gives the famous gradient
// (softmax - onehot) / count. docs/softmax.md derives it. The row loops
// that define the result are in cross_entropy.h; with the fast kernels on,
// core/kernels/cross_entropy.cpp runs the same loops compiled for AVX2 too.
// Tests: tests/test_loss.cpp, tests/test_kernels.cpp.
#include "core/ops/cross_entropy.h"

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"

namespace ember {

using internal::check_floating;
using internal::contiguous_data;
using internal::cross_entropy_backward_rows;
using internal::cross_entropy_forward_rows;
using internal::empty_for;
using internal::kFastKernelsBuilt;
using internal::use_fast_kernels;
namespace fast = internal::fast;

namespace {

// The rows of cross_entropy.h, or their fast copy when the fast kernels are
// on (core/kernels/dispatch.h): the same loops, the same bits.
template <typename T>
double forward(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index, double* lse) {
    if constexpr (kFastKernelsBuilt) {
        if (use_fast_kernels()) return fast::cross_entropy_forward(x, targets, n, c, ignore_index, lse);
    }
    return cross_entropy_forward_rows(x, targets, n, c, ignore_index, lse);
}

template <typename T>
void backward(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index, const double* lse,
              double scale, T* dx) {
    if constexpr (kFastKernelsBuilt) {
        if (use_fast_kernels()) return fast::cross_entropy_backward(x, targets, n, c, ignore_index, lse, scale, dx);
    }
    cross_entropy_backward_rows(x, targets, n, c, ignore_index, lse, scale, dx);
}

} // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
    // Accept (N,C) with (N), and a single row (C) with a 0-d target.
    bool single = logits.dim() == 1;
    if (!(logits.dim() == 2 || single))
        fail<ShapeError>("cross_entropy", "logits must be (N,C) or (C), got ", logits.shape(), " with targets ",
                         targets.shape());
    check_floating(logits, "cross_entropy", "logits");
    if (targets.dtype() != kInt64)
        fail<DTypeError>("cross_entropy", "targets must be int64 class indices, got ", dtype_name(targets.dtype()), " ",
                         targets.shape(), " (logits ", logits.shape(), ")");
    Shape want = single ? Shape{} : Shape{logits.shape()[0]};
    if (targets.shape() != want)
        fail<ShapeError>("cross_entropy", "targets of shape ", targets.shape(), " do not match logits of shape ",
                         logits.shape(), " (expected targets ", want, ")");
    const int64_t n = single ? 1 : logits.shape()[0];
    const int64_t c = logits.shape().back();
    Tensor t = contiguous_data(targets);
    const int64_t* pt = t.data_ptr<int64_t>();
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (pt[i] == ignore_index) continue;
        if (pt[i] < 0 || pt[i] >= c)
            fail<IndexError>("cross_entropy", "target ", pt[i], " at position ", i, " is out of range for ", c,
                             " classes (logits ", logits.shape(), ")");
        ++count;
    }

    Tensor x = contiguous_data(logits);
    Tensor lse = empty_for("cross_entropy", {n}, kFloat64); // log sum_j e^(x_nj), per row
    Tensor loss = empty_for("cross_entropy", {}, logits.dtype());
    dispatch_floating(x.dtype(), "cross_entropy", [&]<typename T>(TypeTag<T>) {
        const T* px = x.data_ptr<T>();
        double* pl = lse.data_ptr<double>();
        const double total = forward(px, pt, n, c, ignore_index, pl);
        // Every target ignored: 0/0 = NaN, as PyTorch.
        loss.data_ptr<T>()[0] = static_cast<T>(total / static_cast<double>(count));
    });

    // forward: loss = 1/count sum_n (lse_n - x[n, t_n]). d lse_n / d x_nj =
    // softmax(x_n)_j, so dx_nj = dout / count * (softmax_nj - [j == t_n]) for
    // rows that count, and 0 for ignored rows.
    if (needs_grad(logits))
        attach(loss, "NllLossBackward0", {logits, targets},
               [xs = SavedTensor(x), ts = SavedTensor(t), ls = SavedTensor(lse), ignore_index, count, n,
                c](const Tensor& dout) -> Grads {
                   const Tensor& xv = xs.get();
                   Tensor dx = empty_for("cross_entropy", xv.shape(), xv.dtype());
                   dispatch_floating(xv.dtype(), "cross_entropy", [&]<typename T>(TypeTag<T>) {
                       const T* px = xv.data_ptr<T>();
                       const int64_t* pt = ts.get().data_ptr<int64_t>();
                       const double* pl = ls.get().data_ptr<double>();
                       const double scale = dout.item<double>() / static_cast<double>(count);
                       backward(px, pt, n, c, ignore_index, pl, scale, dx.data_ptr<T>());
                   });
                   return {dx, Tensor()};
               });
    return loss;
}

} // namespace ember
