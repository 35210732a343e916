// Self-attention, in every form the notebooks build it: Head,
// MultiHeadAttention (a list of Heads) and BatchedMultiHeadAttention (all
// heads in one batched product), each described below. Shapes: B batch, T
// time, C channels, NH heads, hs head size. docs/attention.md walks from the
// averaging trick to the batched form, and explains the mistakes the
// notebooks contain. Tests: tests/test_attention.cpp.
#pragma once

#include <array>
#include <optional>
#include <utility>

#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/module.h"

//   Head                       one causal head (the "Let's build GPT" lecture's Head)
//   MultiHeadAttention         a list of Heads, concatenated and projected (the lecture's)
//   BatchedMultiHeadAttention  all heads in one batched matmul, with Q, K, V as three
//                              Linears (Raschka's causal MultiHeadAttention, ch. 3) or
//                              one fused Linear split with chunk ("Implementing
//                              Multi-head Attention"'s V2); causal or not, with or
//                              without biases, d_in != d_out allowed
// (docs/glossary.md names each notebook.)

namespace ember::nn {

// The keys and values an attention layer has computed so far, so that a
// generated sequence can grow by one position at a time without recomputing
// the others (GPT::generate). k and v hold `capacity` positions along their
// time dim, (B,capacity,hs) for a Head, (B,NH,capacity,hs) for batched heads;
// the first `length` are filled.
struct KVCache {
    Tensor k, v;
    int64_t length = 0;
    // Writes k_new and v_new (T new positions along dim `time`) after the
    // cached ones and returns the keys and values of every position so far,
    // as views. Throws a ShapeError (naming `op`) when they do not fit.
    std::pair<Tensor, Tensor> append(const Tensor& k_new, const Tensor& v_new, int64_t time, const char* op);
};

// One head: q = query(x), k = key(x), v = value(x) (Linears without bias),
// weights = softmax(mask(q k^T / sqrt(hs))), dropout on the weights, out = weights v.
// flash: compute the last three with scaled_dot_product_attention
// (docs/flash_attention.md): the same function to rounding, the same dropout
// masks, no (B,T,T) weights stored. keep_attention turns it off for a forward.
class Head : public Module {
public:
    Head(int64_t n_embd, int64_t head_size, int64_t block_size, double dropout, bool flash = false);
    // x (B,T,C) -> (B,T,hs); T may not exceed block_size.
    Tensor forward(const Tensor& x) override;

    std::shared_ptr<Linear> key, query, value;
    Tensor tril; // (block_size, block_size) buffer: 1 on and below the diagonal
    std::shared_ptr<Dropout> dropout;
    bool flash;

    // Set keep_attention to keep the weights (B,T,T) of the last forward, for plots.
    bool keep_attention = false;
    Tensor attention;

    // Generation with a cache: after setup_cache(B), each forward's x holds
    // the positions after those cached (queries at those positions, keys and
    // values of every position so far), until remove_cache(); up to
    // block_size positions in all. No graph is recorded for the cache.
    // setup_cache again empties it.
    void setup_cache(int64_t batch_size);
    void remove_cache() { cache.reset(); }
    std::optional<KVCache> cache;

private:
    Tensor forward_cached(const Tensor& x);
};

// num_heads Heads side by side: out = dropout(proj(cat(heads, -1))).
class MultiHeadAttention : public Module {
public:
    MultiHeadAttention(int64_t num_heads, int64_t head_size, int64_t n_embd, int64_t block_size, double dropout,
                       bool flash = false);
    // x (B,T,C) -> (B,T,C)
    Tensor forward(const Tensor& x) override;

    std::shared_ptr<ModuleList> heads; // of Head
    std::shared_ptr<Linear> proj;      // (num_heads * head_size) -> n_embd
    std::shared_ptr<Dropout> dropout;
};

struct AttentionConfig {
    int64_t d_in = 0;           // channels in
    int64_t d_out = 0;          // channels out: num_heads * head size
    int64_t context_length = 0; // the longest sequence (the mask's size)
    int64_t num_heads = 1;
    double dropout = 0.0;     // on the attention weights
    double out_dropout = 0.0; // on the output, after out_proj
    bool qkv_bias = false;
    bool out_bias = true;
    bool causal = true;
    // One Linear(d_in, 3 d_out) laid out per head as [q_h | k_h | v_h]
    // (reshape to (B,T,NH,3 hs) and chunk), as "Implementing Multi-head Attention"'s
    // MultiHeadAttentionV2.
    bool fused_qkv = false;
    // The scores, mask, softmax, dropout and weights @ v as one
    // scaled_dot_product_attention (docs/flash_attention.md), as nanoGPT's
    // `flash`: the same function to rounding and the same dropout masks,
    // without the (B,NH,T,T) weights. keep_attention turns it off for a forward.
    bool flash = false;
};

// All heads at once: project, split channels into heads with view and
// transpose, one batched matmul for the scores and one for the values,
// merge heads back, project out.
class BatchedMultiHeadAttention : public Module {
public:
    explicit BatchedMultiHeadAttention(const AttentionConfig& config);
    // Raschka's signature: MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias).
    BatchedMultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, int64_t num_heads,
                              bool qkv_bias = false);
    // x (B,T,d_in) -> (B,T,d_out)
    Tensor forward(const Tensor& x) override;

    const AttentionConfig config;
    const int64_t head_dim;
    std::shared_ptr<Linear> W_query, W_key, W_value; // three projections, unless fused_qkv
    std::shared_ptr<Linear> W_qkv;                   // the fused projection, if fused_qkv
    std::shared_ptr<Linear> out_proj;
    std::shared_ptr<Dropout> dropout, out_dropout;
    Tensor mask; // (context_length, context_length): 1 above the diagonal, when causal

    bool keep_attention = false;
    Tensor attention; // (B,NH,T,T) of the last forward, when keep_attention

    // Generation with a cache, as Head's: up to context_length positions.
    void setup_cache(int64_t batch_size);
    void remove_cache() { cache.reset(); }
    std::optional<KVCache> cache;

private:
    // q, k, v (B,NH,T,hs) of x, through one fused or three separate projections.
    std::array<Tensor, 3> project(const Tensor& x) const;
    // Attention of q (B,NH,T,hs) over k, v (B,NH,S,hs) where `masked` (T,S)
    // is false (or undefined), then the heads merged and projected out.
    // square_causal: masked is the plain causal mask of T = S positions,
    // which the fused op applies block by block (is_causal).
    Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& masked, bool square_causal);
};

} // namespace ember::nn
