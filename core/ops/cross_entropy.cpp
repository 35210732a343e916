// cross_entropy, fused with its log_softmax; and dropout.
//
// cross_entropy(logits (N,C), targets (N)) = mean over the targets that are
// not ignore_index of -log softmax(logits[n])[targets[n]]. Fusing the two
// avoids materialising log-probabilities and gives the famous gradient
// (softmax - onehot) / count. docs/softmax.md derives it.
// dropout draws its mask exactly as PyTorch does (core/random.cpp).
// Tests: tests/test_loss.cpp.
#include <cmath>
#include <limits>

#include "autograd.h"
#include "exponential.h"
#include "loops.h"
#include "ops.h"
#include "random_internal.h"
#include "vectorize.h"

namespace ember {

using namespace internal;

namespace {

// cross_entropy's forward over n rows of c logits: lse_n = log sum_j e^(x_nj)
// into lse, and the sum over counted rows of lse_n - x[n, t_n] returned.
template <typename T>
EMBER_VECTOR_CLONES double forward_rows(const T* x, const int64_t* targets, int64_t n, int64_t c,
                                        int64_t ignore_index, double* lse) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
        const T* row = x + i * c;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < c; ++j) m = std::max(m, row[j]);
        // The exponentials in x's dtype (as PyTorch's log_softmax), their sum in double.
        const double sum = sum_exp(row, 1, c, m);
        lse[i] = static_cast<double>(m) + std::log(sum);
        // -log softmax(x)[t] = lse - x[t]
        if (targets[i] != ignore_index) total += lse[i] - static_cast<double>(row[targets[i]]);
    }
    return total;
}

// Its backward: dx_nj = scale * (softmax_nj - [j == t_n]) for counted rows,
// 0 for ignored ones, with softmax_nj = e^(x_nj - lse_n) in x's dtype.
template <typename T>
EMBER_VECTOR_CLONES void backward_rows(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                                       const double* lse, double scale, T* dx) {
    for (int64_t i = 0; i < n; ++i) {
        T* drow = dx + i * c;
        if (targets[i] == ignore_index) {
            for (int64_t j = 0; j < c; ++j) drow[j] = T(0);
            continue;
        }
        for (int64_t j = 0; j < c; ++j)
            drow[j] = static_cast<T>(
                static_cast<double>(exponential(static_cast<T>(static_cast<double>(x[i * c + j]) - lse[i]))) * scale);
        drow[targets[i]] -= static_cast<T>(scale);
    }
}

} // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
    // Accept (N,C) with (N), and a single row (C) with a 0-d target.
    bool single = logits.dim() == 1;
    if (!(logits.dim() == 2 || single))
        fail<ShapeError>("cross_entropy", "logits must be (N,C) or (C), got ", logits.shape(), " with targets ",
                         targets.shape());
    if (!logits.is_floating_point())
        fail<DTypeError>("cross_entropy", "logits must be float32 or float64, got ", dtype_name(logits.dtype()), " ",
                         logits.shape());
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
    Tensor lse = empty({n}, kFloat64); // log sum_j e^(x_nj), per row
    Tensor loss = empty({}, logits.dtype());
    dispatch_floating(x.dtype(), "cross_entropy", [&]<typename T>(TypeTag<T>) {
        const double total = forward_rows(x.data_ptr<T>(), pt, n, c, ignore_index, lse.data_ptr<double>());
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
                   Tensor dx = empty(xv.shape(), xv.dtype());
                   dispatch_floating(xv.dtype(), "cross_entropy", [&]<typename T>(TypeTag<T>) {
                       backward_rows(xv.data_ptr<T>(), ts.get().data_ptr<int64_t>(), n, c, ignore_index,
                                     ls.get().data_ptr<double>(), dout.item<double>() / static_cast<double>(count),
                                     dx.data_ptr<T>());
                   });
                   return {dx, Tensor()};
               });
    return loss;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
    if (!(p >= 0.0 && p <= 1.0))
        fail<ValueError>("dropout", "probability must be between 0 and 1, got ", p, " (input ", x.shape(), ")");
    if (!x.is_floating_point())
        fail<DTypeError>("dropout", "needs a floating point tensor, got ", dtype_name(x.dtype()), " ", x.shape());
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
    Tensor noise = empty(x.shape(), x.dtype());
    bernoulli_fill(noise, 1.0 - p, kept, generator_or_default(generator));
    return mul(x, noise);
}

} // namespace ember
