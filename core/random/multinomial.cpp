// multinomial: sampling category indices from rows of weights, as PyTorch 1.13.
//
// probs (V) -> (num_samples), probs (B,V) -> (B,num_samples), int64. Rows are
// non-negative weights; they need not sum to 1. Two algorithms, chosen as 1.13
// chooses them (torch 2.x also sends replacement=true, num_samples=1 to the
// first):
//  * replacement=false: the Gumbel trick, argmax / top-k of probs / q with
//    q ~ Exp(1) drawn over all rows at once;
//  * replacement=true: a running-sum CDF per row and a binary search per sample.
// docs/random.md ("Exponential and multinomial"). Tests: tests/test_random.cpp.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/ops/ops.h"
#include "core/random/fill.h"

namespace ember {

using internal::check_floating;
using internal::contiguous_data;
using internal::empty_preserving_layout;
using internal::generator_or_default;

namespace {

// Throws unless every weight is finite and >= 0 and every row has one > 0.
template <typename T>
void check_weights(const T* w, int64_t rows, int64_t categories, const Shape& shape) {
    for (int64_t i = 0; i < rows; ++i) {
        bool any_positive = false;
        for (int64_t j = 0; j < categories; ++j) {
            T v = w[i * categories + j];
            if (!(v >= 0) || !std::isfinite(v))
                fail<ValueError>("multinomial", "probabilities must be finite and >= 0, found ", v, " at row ", i,
                                 ", column ", j, " of probs of shape ", shape);
            any_positive = any_positive || v > 0;
        }
        if (!any_positive)
            fail<ValueError>("multinomial", "row ", i, " of probs of shape ", shape,
                             " sums to 0: it is not a distribution");
    }
}

// Fast path (replacement=false). With q ~ Exp(1), argmax_j p_j / q_j is an
// exact sample from p (the Gumbel-max trick, exponentiated: -log U is Exp(1)),
// and the top k of p / q are k samples without replacement.
template <typename T>
void sample_gumbel(const Tensor& probs, int64_t num_samples, int64_t* out, Generator& gen) {
    const int64_t rows = probs.dim() == 2 ? probs.shape()[0] : 1;
    const int64_t categories = probs.shape().back();
    // q has probs' layout and is drawn in its memory order: B*V doubles.
    Tensor q = empty_preserving_layout(probs, probs.dtype(), "multinomial");
    q.exponential_(1.0, &gen);
    Tensor p = contiguous_data(probs), qc = contiguous_data(q);
    const T* pp = p.data_ptr<T>();
    const T* pq = qc.data_ptr<T>();
    std::vector<T> v(categories);
    // top-k works on (value, index) pairs in double, PyTorch's accumulate type.
    using Elem = std::pair<double, int64_t>;
    std::vector<Elem> queue(categories);
    // PyTorch's order: larger first, NaN above everything.
    auto before = [](const Elem& x, const Elem& y) {
        return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
    };
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < categories; ++j) v[j] = pp[i * categories + j] / pq[i * categories + j];
        if (num_samples == 1) {
            // argmax: the first maximum; a NaN counts as the maximum.
            int64_t best = 0;
            for (int64_t j = 1; j < categories && !std::isnan(v[best]); ++j)
                if (std::isnan(v[j]) || v[j] > v[best]) best = j;
            out[i] = best;
            continue;
        }
        // topk, sorted, as PyTorch's CPU kernel does it (ATen's TopKImpl.h):
        // the same libstdc++ algorithms on the same pairs, so equal values
        // (zero weights) come out in the same order.
        const int64_t k = num_samples;
        for (int64_t j = 0; j < categories; ++j) queue[j] = {static_cast<double>(v[j]), j};
        if (k * 64 <= categories) {
            std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), before);
        } else {
            std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(), before);
            std::sort(queue.begin(), queue.begin() + k - 1, before);
        }
        for (int64_t j = 0; j < k; ++j) out[i * k + j] = queue[j].second;
    }
}

// replacement=true: per row, cdf[j] = (w_0 + ... + w_j) / total with the sums
// and the division in T (sequentially: the rounding matters), the last entry
// forced to 1; then for each sample, u = u53 and the first j with cdf[j] >= u.
template <typename T>
void sample_cdf(const Tensor& probs, int64_t num_samples, int64_t* out, Generator& gen) {
    const int64_t rows = probs.dim() == 2 ? probs.shape()[0] : 1;
    const int64_t categories = probs.shape().back();
    Tensor p = contiguous_data(probs);
    const T* pp = p.data_ptr<T>();
    std::vector<T> cdf(categories);
    for (int64_t i = 0; i < rows; ++i) {
        T sum = 0;
        for (int64_t j = 0; j < categories; ++j) {
            sum += pp[i * categories + j];
            cdf[j] = sum;
        }
        for (int64_t j = 0; j < categories; ++j) cdf[j] /= sum;
        cdf[categories - 1] = 1;
        for (int64_t s = 0; s < num_samples; ++s) {
            const double u = gen.uniform_double();
            // Binary search for the first cdf[j] >= u (cdf read as double).
            int64_t left = 0, right = categories;
            while (right > left) {
                int64_t mid = left + (right - left) / 2;
                if (static_cast<double>(cdf[mid]) < u) left = mid + 1;
                else right = mid;
            }
            out[i * num_samples + s] = left;
        }
    }
}

} // namespace

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* generator) {
    if (probs.dim() != 1 && probs.dim() != 2)
        fail<ShapeError>("multinomial", "probs must be 1-D (V) or 2-D (B,V), got shape ", probs.shape());
    check_floating(probs, "multinomial", "probs");
    if (num_samples <= 0)
        fail<ValueError>("multinomial", "num_samples must be positive, got ", num_samples, " (probs of shape ",
                         probs.shape(), ")");
    const int64_t categories = probs.shape().back();
    if (!replacement && num_samples > categories)
        fail<ValueError>("multinomial", "cannot draw ", num_samples, " samples without replacement from ", categories,
                         " categories (probs of shape ", probs.shape(), ")");
    if (categories > (int64_t{1} << 24))
        fail<ValueError>("multinomial", "at most 2^24 categories, got ", categories, " (probs of shape ", probs.shape(),
                         ")");
    Shape out_shape = probs.dim() == 1 ? Shape{num_samples} : Shape{probs.shape()[0], num_samples};
    Tensor out = internal::empty_for("multinomial", out_shape, kInt64);
    if (out.numel() == 0) return out;
    Generator& gen = generator_or_default(generator);
    std::lock_guard lock(gen.mutex()); // this op's draws: one run of the stream
    dispatch_floating(probs.dtype(), "multinomial", [&]<typename T>(TypeTag<T>) {
        Tensor p = contiguous_data(probs);
        const int64_t rows = probs.dim() == 2 ? probs.shape()[0] : 1;
        check_weights(p.data_ptr<T>(), rows, categories, probs.shape());
        if (replacement) sample_cdf<T>(probs, num_samples, out.data_ptr<int64_t>(), gen);
        else sample_gumbel<T>(probs, num_samples, out.data_ptr<int64_t>(), gen);
    });
    return out;
}

} // namespace ember
