// What both GPTs (nn/gpt.h, nn/fast_gpt.h) share: the argument checks
// (nn::generate's too), so that each model's forward opens with one line,
// and the weights' initialisation. Private to ember.
#pragma once

#include <optional>

#include "core/ops/ops.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"

namespace ember::internal {

// idx (B,T) int64 with T <= max_T - start (start: positions already cached),
// and targets undefined or int64 of idx's shape.
inline void check_tokens(const char* op, const Tensor& idx, const Tensor& targets, int64_t max_T, int64_t start = 0) {
    if (idx.dtype() != kInt64)
        fail<DTypeError>(op, "idx must hold int64 token ids, got ", dtype_name(idx.dtype()), " ", idx.shape());
    if (idx.dim() != 2) fail<ShapeError>(op, "idx must be (B,T), got ", idx.shape());
    if (start + idx.size(1) > max_T) {
        if (start == 0)
            fail<ShapeError>(op, "sequence length T=", idx.size(1), " exceeds block_size=", max_T, " (idx ",
                             idx.shape(), ")");
        fail<ShapeError>(op, "T=", idx.size(1), " new positions after the ", start, " cached exceed block_size=", max_T,
                         " (idx ", idx.shape(), ")");
    }
    if (targets.defined() && (targets.shape() != idx.shape() || targets.dtype() != kInt64))
        fail<ShapeError>(op, "targets must be int64 of idx's shape ", idx.shape(), ", got ",
                         dtype_name(targets.dtype()), " ", targets.shape());
}

// The arguments of a generate(): idx (B,T) int64 with T >= 1, and what sampling takes.
inline void check_generate(const char* op, const Tensor& idx, int64_t max_new_tokens, double temperature = 1.0,
                           std::optional<int64_t> top_k = std::nullopt) {
    if (!(temperature > 0)) fail<ValueError>(op, "temperature must be positive, got ", temperature);
    if (top_k && *top_k < 1) fail<ValueError>(op, "top_k must be at least 1, got ", *top_k);
    if (max_new_tokens < 0) fail<ValueError>(op, "max_new_tokens must be non-negative, got ", max_new_tokens);
    if (idx.dim() != 2 || idx.dtype() != kInt64 || idx.size(1) < 1)
        fail<ShapeError>(op, "idx must be (B,T) int64 with T >= 1, got ", dtype_name(idx.dtype()), " ", idx.shape());
}

// gpt.py's _init_weights, which nanoGPT's keeps: Linear and Embedding
// weights ~ N(0, 0.02), biases 0. Module::apply runs it on every module.
inline void gpt_init_weights(nn::Module& module) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&module)) {
        nn::init::normal_(linear->weight, 0.0, 0.02);
        if (linear->bias.defined()) nn::init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<nn::Embedding*>(&module)) {
        nn::init::normal_(embedding->weight, 0.0, 0.02);
    }
}

} // namespace ember::internal
