// nanoGPT's sampling: see generate.h.
#include "nn/generate.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/autograd/autograd.h"
#include "nn/gpt_checks.h"

namespace ember::nn {

namespace {

// Nucleus sampling's cut: true for every token of a row of probs (B,V)
// outside the most likely ones whose probabilities first reach p.
Tensor outside_nucleus(const Tensor& probs_in, double p) {
    Tensor probs = probs_in.to(kFloat64).contiguous();
    const int64_t B = probs.size(0), V = probs.size(1);
    Tensor outside = zeros({B, V}, kBool);
    const double* prob = probs.data_ptr<double>();
    bool* out = outside.data_ptr<bool>();
    std::vector<int64_t> order(static_cast<size_t>(V));
    for (int64_t b = 0; b < B; ++b) {
        const double* row = prob + b * V;
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [row](int64_t i, int64_t j) { return row[i] > row[j]; });
        double before = 0; // the probability of the tokens more likely than this one
        for (int64_t i : order) {
            if (before >= p) out[b * V + i] = true;
            before += row[i];
        }
    }
    return outside;
}

} // namespace

Tensor sample_next(const Tensor& logits_in, double temperature, std::optional<int64_t> top_k, Generator* generator,
                   std::optional<double> top_p) {
    if (logits_in.dim() != 2) fail<ShapeError>("sample_next", "logits must be (B,V), got ", logits_in.shape());
    if (!(temperature > 0)) fail<ValueError>("sample_next", "temperature must be positive, got ", temperature);
    if (top_k && *top_k < 1) fail<ValueError>("sample_next", "top_k must be at least 1, got ", *top_k);
    if (top_p && !(*top_p > 0 && *top_p <= 1)) fail<ValueError>("sample_next", "top_p must be in (0, 1], got ", *top_p);
    NoGradGuard no_grad;
    // below 1 a temperature sharpens the distribution, above 1 it flattens it
    Tensor logits = logits_in / temperature; // (B,V)
    // with top_k, only the k most likely tokens of each row can be drawn
    if (top_k) {
        Tensor v = topk(logits, std::min(*top_k, logits.size(-1))).values; // (B,k)
        logits = logits.masked_fill(logits < v.slice(1, -1), -INFINITY);   // below the k-th: never drawn
    }
    // with top_p, only the most likely tokens that together reach p can be drawn
    if (top_p && *top_p < 1) logits = logits.masked_fill(outside_nucleus(softmax(logits, -1), *top_p), -INFINITY);
    Tensor probs = softmax(logits, -1);                             // (B,V)
    return multinomial(probs, 1, /*replacement=*/false, generator); // (B,1)
}

Tensor generate(Module& model, int64_t block_size, Tensor idx, int64_t max_new_tokens, double temperature,
                std::optional<int64_t> top_k, Generator* generator) {
    internal::check_generate("generate", idx, max_new_tokens, temperature, top_k);
    if (block_size < 1) fail<ValueError>("generate", "block_size must be positive, got ", block_size);
    NoGradGuard no_grad;
    for (int64_t i = 0; i < max_new_tokens; ++i) {
        // the model sees at most block_size tokens: the last ones
        Tensor idx_cond = idx.slice(1, -block_size);
        Tensor logits = model(idx_cond).select(1, -1); // (B,V): the last position's
        Tensor idx_next = sample_next(logits, temperature, top_k, generator);
        idx = cat({idx, idx_next}, 1); // (B,T+1)
    }
    return idx;
}

} // namespace ember::nn
