// The transformer Block and a small GPT language model, as the "Let's build
// GPT" lecture builds them (its gpt.py), for character-level models.
//
//   Block:  x = x + sa(ln1(x)); x = x + ffwd(ln2(x))      (pre-LayerNorm)
//   GPT:    tokens -> token + position embeddings -> blocks -> ln_f -> lm_head
//
// With the same seed, a GPT built here has the parameters PyTorch's gpt.py
// builds, to the bit: modules are constructed in the same order and then
// re-initialised as its _init_weights does. Your own norm, attention or MLP
// go in through BlockLayers (docs/extending.md). docs/attention.md; tests in
// tests/test_gpt.cpp.
#pragma once

#include <functional>
#include <optional>

#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ember::nn {

// The layers a Block is built from, as factories, so that a Block and a GPT
// can be built with your own norm (RMSNorm), attention (rotary, a cache) or
// MLP (SwiGLU) without copying them. Each factory is called where the
// lecture's layer would be constructed, so an empty one builds exactly
// gpt.py's layer, with gpt.py's random draws. Every module built must map
// x (B,T,C) to (B,T,C).
struct BlockLayers {
    // n_embd -> ln1, ln2 (and the GPT's ln_f). Empty: LayerNorm(n_embd).
    std::function<std::shared_ptr<Module>(int64_t n_embd)> make_norm;
    // -> sa. The config says d_in = d_out = n_embd, context_length =
    // block_size, num_heads = n_head, dropout = out_dropout = the block's.
    // Empty: MultiHeadAttention (a list of Heads), or
    // BatchedMultiHeadAttention(config) when the block is `batched`.
    std::function<std::shared_ptr<Module>(const AttentionConfig& config)> make_attention;
    // (n_embd, dropout) -> ffwd. Empty: FeedForward(n_embd, dropout).
    std::function<std::shared_ptr<Module>(int64_t n_embd, double dropout)> make_feed_forward;
};

class Block : public Module {
public:
    // batched: one BatchedMultiHeadAttention instead of a list of Heads
    // (when layers.make_attention is empty); flash: attention through
    // scaled_dot_product_attention (attention.h), for the built-in attention
    // and in the config a make_attention receives.
    Block(int64_t n_embd, int64_t n_head, int64_t block_size, double dropout, bool batched = false, bool flash = false,
          const BlockLayers& layers = {});
    // x (B,T,C) -> (B,T,C). Throws a ShapeError naming the layer if one of
    // them changes the shape.
    Tensor forward(const Tensor& x) override;

    std::shared_ptr<Module> sa;       // MultiHeadAttention or BatchedMultiHeadAttention, or yours
    std::shared_ptr<Module> ffwd;     // FeedForward, or yours
    std::shared_ptr<Module> ln1, ln2; // LayerNorm, or yours
};

struct GPTConfig {
    int64_t vocab_size = 65;
    int64_t block_size = 8; // the longest context
    int64_t n_embd = 32;
    int64_t n_head = 4;
    int64_t n_layer = 3;
    double dropout = 0.0;
    bool batched_attention = false; // heads in one batched matmul instead of a list of Heads
    // Attention through the fused scaled_dot_product_attention
    // (docs/flash_attention.md): the same model to rounding, and far less
    // memory. Unset: fused from block_size 32 up, where it trains faster; the
    // notebooks' ops below, where they do (docs/performance.md has the
    // measurements). false: the notebooks' ops, bit for bit with PyTorch
    // 1.13's gpt.py.
    std::optional<bool> flash;
    bool uses_flash() const { return flash.value_or(block_size >= 32); }
    // Recompute each Block's activations in the backward instead of keeping
    // them (ember::checkpoint, docs/checkpointing.md): training keeps one
    // (B,T,C) tensor per Block, at the price of running each Block's forward
    // twice. The same gradients, bit for bit.
    bool checkpoint_blocks = false;
    // gpt.py's _init_weights: Linear and Embedding weights ~ N(0, 0.02), biases 0.
    // Off: every layer keeps PyTorch's default initialisation. It reaches
    // the Linears inside your own layers too, as gpt.py's self.apply would.
    bool gpt_init = true;
    // Your own norm, attention or MLP for every block; make_norm builds ln_f too.
    BlockLayers layers = {};
};

// Extends each row of idx (B,T) by max_new_tokens tokens sampled from any
// model whose forward maps (B,T) ids to (B,T,V) logits: the logits of the
// last position (the context cropped to block_size), divided by temperature,
// restricted to the top_k most likely when given, softmaxed and sampled with
// multinomial, exactly as nanoGPT draws with PyTorch (without MKL:
// docs/random.md). Records no graph and
// leaves the model's mode alone (call eval() first to turn dropout off).
// Each new token runs the model over the whole context; GPT::generate keeps
// a key/value cache instead.
Tensor generate(Module& model, int64_t block_size, Tensor idx, int64_t max_new_tokens, double temperature = 1.0,
                std::optional<int64_t> top_k = std::nullopt, Generator* generator = nullptr);

struct GPTOutput {
    Tensor logits; // (B,T,vocab_size)
    Tensor loss;   // mean cross-entropy against the targets; undefined without targets
};

class GPT : public Module {
public:
    explicit GPT(const GPTConfig& config);
    // idx (B,T) int64 token ids, T <= block_size; targets (B,T) or undefined.
    GPTOutput forward(const Tensor& idx, const Tensor& targets);
    Tensor forward(const Tensor& idx) override { return forward(idx, Tensor()).logits; }

    // nn::generate with this model and its block_size, with a key/value
    // cache in every attention layer (use_cache): the prompt runs once, then
    // each new token runs alone against the cached keys and values, while
    // the context fits in block_size. Past it the context is cropped, as
    // nn::generate does, and each token runs the whole cropped context again
    // (the positions of every token change). The same logits as without the
    // cache up to rounding, and the same tokens drawn. A GPT with attention
    // of your own (BlockLayers::make_attention) generates without the cache.
    Tensor generate(Tensor idx, int64_t max_new_tokens, double temperature = 1.0,
                    std::optional<int64_t> top_k = std::nullopt, Generator* generator = nullptr, bool use_cache = true);

    // The caches behind generate, for generation loops of one's own: after
    // setup_caches(B), each forward continues the sequence after the
    // positions already run (up to block_size), until remove_caches().
    void setup_caches(int64_t batch_size);
    void remove_caches();
    int64_t cached_positions() const { return cached_; } // -1 without caches

    const GPTConfig config;
    std::shared_ptr<Embedding> token_embedding_table, position_embedding_table;
    std::shared_ptr<Sequential> blocks;
    std::shared_ptr<Module> ln_f; // LayerNorm, or config.layers.make_norm's
    std::shared_ptr<Linear> lm_head;

private:
    int64_t cached_ = -1; // positions run since setup_caches, or -1
};

} // namespace ember::nn
