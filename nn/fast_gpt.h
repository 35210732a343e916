// The fast GPT: the lecture's model (nn/gpt.h) in the layout of nanoGPT's
// model.py and OpenAI's GPT-2, with every speed feature an explicit option.
//
//   GPT:    tokens -> wte + wpe -> drop -> h (Blocks) -> ln_f -> lm_head
//   Block:  x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))
//   CausalSelfAttention: one Linear c_attn gives q, k and v of every head;
//           attention through scaled_dot_product_attention (flash); c_proj
//   MLP:    c_fc, activation, c_proj, dropout
//
// What it adds to the lecture's classes, each a switch of GPTConfig or a
// function of its own: FlashAttention (flash), a key/value cache for
// generation (KVCache, generate), activation checkpointing
// (checkpoint_blocks), and the attention weights of a prompt for pictures
// (attention_weights, inspect_attention). Data parallelism over MPI (nn/distributed.h) runs it
// in train_gpt. Parameter names are GPT-2's (transformer.h.0.attn.c_attn.weight,
// ...). GPTConfig::lecture(c) gives gpt.py's choices (ReLU, no bias in the
// q/k/v projection, a biased and untied lm_head), and from_lecture()
// converts a GPTLanguageModel's state_dict: the two then compute the same
// function (tests/test_fast_gpt.cpp proves it). docs/gpt.md, "From gpt.py
// to the fast model", maps every parameter.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ember::nn::fast {

enum class Activation {
    relu,     // gpt.py's FeedForward
    gelu,     // the erf form (nanoGPT's nn.GELU())
    gelu_tanh // the tanh approximation OpenAI's GPT-2 was trained with
};

struct GPTConfig {
    // The sizes, named as in nn::GPTConfig; the defaults are GPT-2's smallest (124 M).
    int64_t vocab_size = 50257;
    int64_t block_size = 1024; // the longest context
    int64_t n_embd = 768;
    int64_t n_head = 12;
    int64_t n_layer = 12;
    double dropout = 0.0; // on the attention weights, after each c_proj, and on the embeddings (below)
    // The layout: GPT-2's by default; lecture() gives gpt.py's.
    bool bias = true;              // biases in c_fc, both c_proj and the LayerNorms
    bool qkv_bias = true;          // a bias in c_attn (gpt.py's heads have none)
    bool lm_head_bias = false;     // gpt.py's lm_head has one; GPT-2's has not
    bool tie_weights = true;       // lm_head.weight is transformer.wte.weight (GPT-2)
    bool embedding_dropout = true; // dropout on wte + wpe (nanoGPT's transformer.drop); gpt.py has none
    Activation activation = Activation::gelu_tanh;
    // Speed: switches that leave the function alone (to rounding).
    bool flash = true;              // attention by scaled_dot_product_attention, the (T,T) weights never stored
    bool checkpoint_blocks = false; // keep one (B,T,C) tensor per block, recompute the rest in backward

    // gpt.py's model with the lecture's sizes, in this layout.
    static GPTConfig lecture(const nn::GPTConfig& lecture);
};

// One layer's attention, looked inside (GPT::inspect_attention): each head's
// queries, keys and values, (B,NH,T,hs), and its weights
// softmax(q @ k^T / sqrt(hs), causal), (B,NH,T,T), by the unfused ops.
struct AttentionInside {
    Tensor q, k, v, weights;
};

// The keys and values the attention layers have computed so far, so that
// generation runs each new position alone (docs/kv_cache.md). Made by
// GPT::make_cache: k[l] and v[l] are layer l's, (NH,B,block_size,hs) (heads
// first: fast_gpt.cpp, Note [heads first]); the first `length` positions
// are filled.
struct KVCache {
    std::vector<Tensor> k, v;
    int64_t length = 0;
};

class CausalSelfAttention : public Module {
public:
    explicit CausalSelfAttention(const GPTConfig& config);
    // x (B,T,C) -> (B,T,C)
    Tensor forward(const Tensor& x) override;
    // x (B,T,C): the positions after the cache.length cached ones. Appends
    // their keys and values to layer `layer` of the cache (cache.length is
    // GPT's to advance). Records no graph.
    Tensor forward(const Tensor& x, KVCache& cache, size_t layer);
    // The attention weights of x (B,T,C) -> (B,NH,T,T), by the unfused ops
    // and without dropout: for pictures and inspection.
    Tensor attention_weights(const Tensor& x);
    // The same with the queries, keys and values they came from.
    AttentionInside inspect(const Tensor& x);

    const int64_t n_head, n_embd;
    const bool flash;
    std::shared_ptr<Linear> c_attn, c_proj; // C -> 3C (q, k, v of every head), C -> C
    std::shared_ptr<Dropout> attn_dropout, resid_dropout;
    Tensor mask; // (block_size, block_size) bool, true above the diagonal; not in state_dict

private:
    // x (B,T,C) -> q, k, v, each (NH,B,T,hs): views of c_attn's output.
    std::array<Tensor, 3> project_qkv(const Tensor& x);
    // The unfused weights of queries at positions start..start+T-1 over keys
    // 0..S-1: softmax(q @ k^T / sqrt(hs)), later keys masked out -> (NH,B,T,S).
    Tensor weights(const Tensor& q, const Tensor& k, int64_t start);
    // Queries at positions start..start+T-1 over keys and values 0..S-1 -> (NH,B,T,hs).
    Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, int64_t start);
    // y (NH,B,T,hs) -> heads side by side (B,T,C) -> c_proj -> dropout.
    Tensor merge_and_project(const Tensor& y);
};

class MLP : public Module {
public:
    explicit MLP(const GPTConfig& config);
    // x (B,T,C) -> (B,T,C): dropout(c_proj(act(c_fc(x))))
    Tensor forward(const Tensor& x) override;
    std::shared_ptr<Linear> c_fc, c_proj; // C -> 4C, 4C -> C
    std::shared_ptr<Module> act;          // ReLU or GELU
    std::shared_ptr<Dropout> dropout;
};

class Block : public Module {
public:
    explicit Block(const GPTConfig& config);
    // x (B,T,C) -> (B,T,C)
    Tensor forward(const Tensor& x) override;
    // The same, x holding the positions after those cached (CausalSelfAttention).
    Tensor forward(const Tensor& x, KVCache& cache, size_t layer);
    std::shared_ptr<LayerNorm> ln_1, ln_2;
    std::shared_ptr<CausalSelfAttention> attn;
    std::shared_ptr<MLP> mlp;
};

class GPT : public Module {
public:
    // Initialised as nanoGPT initialises: Linear and Embedding weights ~
    // N(0, 0.02), biases 0, each c_proj.weight ~ N(0, 0.02 / sqrt(2 n_layer)).
    explicit GPT(const GPTConfig& config);
    // idx (B,T) int64 token ids, T <= block_size; targets (B,T) or undefined.
    // logits (B,T,vocab_size); loss the mean cross-entropy against targets.
    GPTOutput forward(const Tensor& idx, const Tensor& targets);
    Tensor forward(const Tensor& idx) override { return forward(idx, Tensor()).logits; }

    // ---- generation with a key/value cache ----------------------------------------------
    // An empty cache for batch_size sequences.
    KVCache make_cache(int64_t batch_size) const;
    // The logits (B,T,V) of idx's T positions, which follow the cache.length
    // cached ones (T <= block_size - cache.length); their keys and values
    // are added and cache.length grows by T. Records no graph.
    Tensor forward(const Tensor& idx, KVCache& cache);
    // nn::generate's sampling (temperature, top-k, generator) with a cache:
    // the prompt runs once, then each new token alone, while the context
    // fits in block_size; past it the context is cropped (every position
    // moves) and runs whole. The same tokens as without the cache
    // (use_cache = false) for the same seed, up to rounding in the logits.
    Tensor generate(Tensor idx, int64_t max_new_tokens, double temperature = 1.0,
                    std::optional<int64_t> top_k = std::nullopt, Generator* generator = nullptr, bool use_cache = true);

    // Every layer's attention weights for idx (B,T): (B,NH,T,T) each, by
    // the unfused ops, in eval mode (no dropout), recording no graph.
    std::vector<Tensor> attention_weights(const Tensor& idx);
    // The same run, each layer's q, k and v with its weights (the attention
    // explorer's query view, examples/train/explore.h).
    std::vector<AttentionInside> inspect_attention(const Tensor& idx);

    const GPTConfig config;
    std::shared_ptr<Module> transformer; // a ModuleDict: wte, wpe, drop, h, ln_f
    std::shared_ptr<Embedding> wte, wpe; // token and position embeddings
    std::shared_ptr<Dropout> drop;
    std::shared_ptr<ModuleList> h; // of Block
    std::shared_ptr<LayerNorm> ln_f;
    std::shared_ptr<Linear> lm_head;
};

// A GPTLanguageModel's state_dict in the fast model's names and layout
// (GPTConfig::lecture): each block's heads' query, key and value weights
// stacked into c_attn.weight (all queries, then all keys, then all values,
// head by head), the other tensors renamed. Throws ValueError naming a key
// that is missing.
StateDict from_lecture(const StateDict& lecture);

} // namespace ember::nn::fast
