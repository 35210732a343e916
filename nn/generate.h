// Sampling from a language model, as nanoGPT does it: the logits of the
// last position, divided by a temperature, cut to the top k, softmaxed and
// drawn with multinomial. The same tokens as PyTorch for the same seed
// (without MKL: docs/random.md). gpt.py's own generate (no temperature, no
// top-k) is GPTLanguageModel::generate; the fast model's, with a key/value
// cache, is fast::GPT::generate. Tests: tests/test_gpt.cpp.
#pragma once

#include <optional>

#include "nn/module.h"

namespace ember::nn {

// One draw per row of logits (B,V) -> (B,1) int64: logits / temperature,
// then (with top_k) every logit below the k-th largest of its row set to
// -inf, then (with top_p, nucleus sampling) every token outside the most
// likely ones whose probabilities first reach top_p set to -inf (a token is
// kept while the tokens more likely than it hold less than top_p; the most
// likely is always kept: Hugging Face's TopPLogitsWarper), softmax,
// multinomial. Records no graph of its own.
Tensor sample_next(const Tensor& logits, double temperature = 1.0, std::optional<int64_t> top_k = std::nullopt,
                   Generator* generator = nullptr, std::optional<double> top_p = std::nullopt);

// Extends each row of idx (B,T) by max_new_tokens tokens sampled from any
// model whose forward maps (B,T) ids to (B,T,V) logits: each step runs the
// model on the context cropped to its last block_size tokens and draws with
// sample_next. Records no graph, and leaves the model's mode alone (call
// eval() first to turn dropout off).
Tensor generate(Module& model, int64_t block_size, Tensor idx, int64_t max_new_tokens, double temperature = 1.0,
                std::optional<int64_t> top_k = std::nullopt, Generator* generator = nullptr);

} // namespace ember::nn
