// Self-attention as the notebooks write it. Each class runs its notebook's
// lines, in the notebook's order, and nothing else (some first check the
// input's shape, so that a wrong one is named, not failed on deep inside).
// Where a notebook multiplies by hs^-0.5 the code multiplies, where it
// divides by sqrt(hs) the code divides. docs/attention.md walks from the averaging trick to
// these classes; the fast model (nn/fast_gpt.h) computes the same function
// with one fused projection, FlashAttention and a key/value cache.
// Tests: tests/test_attention.cpp.
//
//   Head, MultiHeadAttention   the "Let's build GPT" lecture's (its gpt.py): one
//                              causal head, and a list of heads concatenated and projected
//   BatchedMultiHeadAttention  Raschka's causal MultiHeadAttention ("Build a Large
//                              Language Model (From Scratch)", ch. 3): all heads in one
//                              batched product
//   QKVAttention               "Implementing Multi-head Attention"'s MultiHeadAttention:
//                              Q, K, V and O Linears with biases, no mask
//   FusedQKVAttention          its MultiHeadAttentionV2: one qkv_linear split by chunk
//
// Shapes: B batch, T time, C channels, NH heads, hs head size.
// To look at a head's weights, hook its dropout (register_forward_hook): the
// softmax's output is the dropout's input (docs/attention.md, section 3).
#pragma once

#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ember::nn {

// gpt.py's Head(head_size), with its globals n_embd, block_size and dropout
// as arguments: key, query and value Linears without bias, the causal
// `tril` buffer, dropout on the weights.
class Head : public Module {
public:
    Head(int64_t n_embd, int64_t head_size, int64_t block_size, double dropout);
    // x (B,T,C) -> (B,T,hs); T may not exceed block_size.
    Tensor forward(const Tensor& x) override;

    std::shared_ptr<Linear> key, query, value;
    Tensor tril; // (block_size, block_size): 1 on and below the diagonal
    std::shared_ptr<Dropout> dropout;
};

// gpt.py's MultiHeadAttention(num_heads, head_size): the heads side by
// side, concatenated, projected back to n_embd, dropout.
class MultiHeadAttention : public Module {
public:
    MultiHeadAttention(int64_t num_heads, int64_t head_size, int64_t n_embd, int64_t block_size, double dropout);
    // x (B,T,C) -> (B,T,C)
    Tensor forward(const Tensor& x) override;

    std::shared_ptr<ModuleList> heads; // of Head
    std::shared_ptr<Linear> proj;      // (num_heads * head_size) -> n_embd
    std::shared_ptr<Dropout> dropout;
};

// Raschka's MultiHeadAttention(d_in, d_out, context_length, dropout,
// num_heads, qkv_bias): W_query, W_key, W_value, out_proj, dropout and the
// `mask` buffer (1 above the diagonal). Named Batched here because the
// lecture's list of heads has the name MultiHeadAttention. d_in may differ
// from d_out; d_out splits into num_heads heads of head_size (his head_dim).
class BatchedMultiHeadAttention : public Module {
public:
    BatchedMultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, int64_t num_heads,
                              bool qkv_bias = false);
    // x (B,T,d_in) -> (B,T,d_out); T may not exceed context_length.
    Tensor forward(const Tensor& x) override;

    const int64_t d_out, num_heads, head_size;
    std::shared_ptr<Linear> W_query, W_key, W_value, out_proj;
    std::shared_ptr<Dropout> dropout;
    Tensor mask; // (context_length, context_length): 1 above the diagonal
};

// "Implementing Multi-head Attention"'s MultiHeadAttention(d_model, n_head):
// Q, K, V and O Linears (with biases), every position attending to every
// other (no causal mask), no dropout.
class QKVAttention : public Module {
public:
    QKVAttention(int64_t d_model, int64_t n_head);
    // x (B,T,d_model) -> (B,T,d_model)
    Tensor forward(const Tensor& x) override;

    const int64_t d_model, n_head, head_size;
    std::shared_ptr<Linear> Q, K, V, O;
};

// Its MultiHeadAttentionV2(d_model, n_head): one Linear(d_model, 3 d_model)
// whose outputs are laid out per head as [q_h | k_h | v_h], reshaped to
// (B,T,NH,3 hs) and split with chunk; then as QKVAttention.
class FusedQKVAttention : public Module {
public:
    FusedQKVAttention(int64_t d_model, int64_t n_head);
    // x (B,T,d_model) -> (B,T,d_model)
    Tensor forward(const Tensor& x) override;

    const int64_t d_model, n_head, head_size;
    std::shared_ptr<Linear> qkv_linear, O;
};

} // namespace ember::nn
