// Block and GPT: see gpt.h. The forward passes are gpt.py's, line for line.
// Tests: tests/test_gpt.cpp.
#include "nn/gpt.h"

#include <cmath>

#include "core/autograd/autograd.h"
#include "core/autograd/checkpoint.h"
#include "nn/init.h"

namespace ember::nn {

namespace {

// A factory's module, checked: a null one is the factory's bug, named.
std::shared_ptr<Module> built(std::shared_ptr<Module> module, const char* owner, const char* factory,
                              const char* role) {
    if (!module) fail<ValueError>(owner, factory, " returned no module for ", role);
    return module;
}

// Runs one of a block's layers, which must keep the shape (B,T,C): a layer
// of yours that returned (B,T,1) would otherwise broadcast silently into
// the residual sum.
Tensor run_layer(Module& layer, const char* role, const Tensor& x) {
    Tensor out = layer(x);
    if (out.shape() != x.shape())
        fail<ShapeError>("Block", role, " (", layer.type_name(), ") returned ", out.shape(), " for an input of ",
                         x.shape(), "; a block's layers must keep the shape (B,T,C)");
    return out;
}

} // namespace

Block::Block(int64_t n_embd, int64_t n_head, int64_t block_size, double dropout, bool batched, bool flash,
             const BlockLayers& layers)
    : Module("Block") {
    // The attention config a factory (or the batched default) receives.
    const AttentionConfig config{.d_in = n_embd,
                                 .d_out = n_embd,
                                 .context_length = block_size,
                                 .num_heads = n_head,
                                 .dropout = dropout,
                                 .out_dropout = dropout,
                                 .flash = flash};
    if (layers.make_attention) {
        sa = register_module("sa", built(layers.make_attention(config), "Block", "make_attention", "sa"));
    } else {
        // The list of heads needs only head_size = n_embd / n_head >= 1 (its
        // projection maps n_head * head_size back to n_embd, as the lecture's);
        // batched heads split the channels exactly, so they need divisibility.
        if (n_head < 1 || n_embd / n_head < 1 || (batched && n_embd % n_head != 0))
            fail<ValueError>("Block", "n_embd=", n_embd, " does not split into n_head=", n_head, " heads",
                             batched ? " (batched heads need n_embd divisible by n_head)" : "");
        if (batched) sa = register_module("sa", std::make_shared<BatchedMultiHeadAttention>(config));
        else
            sa = register_module("sa", std::make_shared<MultiHeadAttention>(n_head, n_embd / n_head, n_embd, block_size,
                                                                            dropout, flash));
    }
    // gpt.py's order: sa, ffwd, ln1, ln2 (the order of the random draws).
    ffwd = register_module("ffwd", layers.make_feed_forward ? built(layers.make_feed_forward(n_embd, dropout), "Block",
                                                                    "make_feed_forward", "ffwd")
                                                            : std::make_shared<FeedForward>(n_embd, dropout));
    auto norm = [&](const char* role) -> std::shared_ptr<Module> {
        if (layers.make_norm) return built(layers.make_norm(n_embd), "Block", "make_norm", role);
        return std::make_shared<LayerNorm>(n_embd);
    };
    ln1 = register_module("ln1", norm("ln1"));
    ln2 = register_module("ln2", norm("ln2"));
}

Tensor Block::forward(const Tensor& x) {
    // Residual connections around communication (attention) and computation
    // (the MLP), each applied to a normalised copy: (B,T,C) -> (B,T,C).
    Tensor h = x + run_layer(*sa, "sa", run_layer(*ln1, "ln1", x));
    return h + run_layer(*ffwd, "ffwd", run_layer(*ln2, "ln2", h));
}

GPT::GPT(const GPTConfig& c) : Module("GPT"), config(c) {
    if (c.vocab_size < 1 || c.block_size < 1 || c.n_layer < 0)
        fail<ValueError>("GPT", "vocab_size and block_size must be positive and n_layer non-negative, got ",
                         c.vocab_size, ", ", c.block_size, ", ", c.n_layer);
    token_embedding_table =
        register_module("token_embedding_table", std::make_shared<Embedding>(c.vocab_size, c.n_embd));
    position_embedding_table =
        register_module("position_embedding_table", std::make_shared<Embedding>(c.block_size, c.n_embd));
    blocks = register_module("blocks", std::make_shared<Sequential>());
    for (int64_t i = 0; i < c.n_layer; ++i)
        blocks->push_back(std::make_shared<Block>(c.n_embd, c.n_head, c.block_size, c.dropout, c.batched_attention,
                                                  c.uses_flash(), c.layers));
    ln_f = register_module("ln_f", c.layers.make_norm ? built(c.layers.make_norm(c.n_embd), "GPT", "make_norm", "ln_f")
                                                      : std::make_shared<LayerNorm>(c.n_embd));
    lm_head = register_module("lm_head", std::make_shared<Linear>(c.n_embd, c.vocab_size));
    if (c.gpt_init) {
        // gpt.py: self.apply(self._init_weights), visiting submodules
        // children first, in registration order, drawing as it goes.
        apply([](Module& m) {
            if (auto* linear = dynamic_cast<Linear*>(&m)) {
                init::normal_(linear->weight, 0.0, 0.02);
                if (linear->bias.defined()) init::zeros_(linear->bias);
            } else if (auto* emb = dynamic_cast<Embedding*>(&m)) {
                init::normal_(emb->weight, 0.0, 0.02);
            }
        });
    }
}

GPTOutput GPT::forward(const Tensor& idx, const Tensor& targets) {
    if (idx.dtype() != kInt64)
        fail<DTypeError>("GPT", "idx must hold int64 token ids, got ", dtype_name(idx.dtype()), " ", idx.shape());
    if (idx.dim() != 2) fail<ShapeError>("GPT", "idx must be (B,T), got ", idx.shape());
    const int64_t B = idx.size(0), T = idx.size(1);
    const int64_t start = std::max<int64_t>(cached_, 0); // with caches: the positions already run
    if (start + T > config.block_size)
        fail<ShapeError>("GPT", "sequence length T=", T, start > 0 ? " after the cached " : "",
                         start > 0 ? std::to_string(start) : "", " exceeds block_size=", config.block_size, " (idx ",
                         idx.shape(), ")");
    if (targets.defined() && (targets.shape() != idx.shape() || targets.dtype() != kInt64))
        fail<ShapeError>("GPT", "targets must be int64 of idx's shape ", idx.shape(), ", got ",
                         dtype_name(targets.dtype()), " ", targets.shape());
    Tensor tok_emb = (*token_embedding_table)(idx);                         // (B,T,C)
    Tensor pos_emb = (*position_embedding_table)(arange(start, start + T)); // (T,C)
    if (cached_ >= 0) cached_ += T;
    Tensor x = tok_emb + pos_emb; // (B,T,C)
    if (config.checkpoint_blocks && is_training()) {
        for (const auto& [name, block] : blocks->named_children()) // each Block's insides recomputed in backward
            x = checkpoint([block = block](const Tensor& in) { return (*block)(in); }, x, block->parameters());
    } else {
        x = (*blocks)(x); // (B,T,C)
    }
    x = (*ln_f)(x);                // (B,T,C)
    Tensor logits = (*lm_head)(x); // (B,T,V)
    Tensor loss;
    if (targets.defined()) loss = cross_entropy(logits.view({B * T, config.vocab_size}), targets.reshape({B * T}));
    return {logits, loss};
}

void GPT::setup_caches(int64_t batch_size) {
    apply([batch_size](Module& m) {
        if (auto* head = dynamic_cast<Head*>(&m)) head->setup_cache(batch_size);
        else if (auto* batched = dynamic_cast<BatchedMultiHeadAttention*>(&m)) batched->setup_cache(batch_size);
    });
    cached_ = 0;
}

void GPT::remove_caches() {
    apply([](Module& m) {
        if (auto* head = dynamic_cast<Head*>(&m)) head->remove_cache();
        else if (auto* batched = dynamic_cast<BatchedMultiHeadAttention*>(&m)) batched->remove_cache();
    });
    cached_ = -1;
}

namespace {

// The sampling loop of both generate()s: last_logits(idx) gives the (B,V)
// logits of the position after idx's last token.
template <typename LastLogits>
Tensor sample(Tensor idx, int64_t max_new_tokens, double temperature, std::optional<int64_t> top_k,
              Generator* generator, const LastLogits& last_logits) {
    for (int64_t i = 0; i < max_new_tokens; ++i) {
        Tensor logits = last_logits(idx) / temperature; // (B,V)
        if (top_k) {
            // Keep the k largest logits of each row; the rest can never be drawn.
            Tensor kth = topk(logits, std::min(*top_k, logits.size(-1))).values.slice(1, -1); // (B,1)
            logits = logits.masked_fill(logits < kth, -INFINITY);
        }
        Tensor probs = softmax(logits, -1);                                    // (B,V)
        Tensor next = multinomial(probs, 1, /*replacement=*/false, generator); // (B,1)
        idx = cat({idx, next}, 1);                                             // (B,T+1)
    }
    return idx;
}

void check_generate_args(int64_t block_size, const Tensor& idx, int64_t max_new_tokens, double temperature,
                         std::optional<int64_t> top_k) {
    if (!(temperature > 0)) fail<ValueError>("generate", "temperature must be positive, got ", temperature);
    if (top_k && *top_k < 1) fail<ValueError>("generate", "top_k must be at least 1, got ", *top_k);
    if (max_new_tokens < 0) fail<ValueError>("generate", "max_new_tokens must be non-negative, got ", max_new_tokens);
    if (block_size < 1) fail<ValueError>("generate", "block_size must be positive, got ", block_size);
    if (idx.dim() != 2 || idx.dtype() != kInt64 || idx.size(1) < 1)
        fail<ShapeError>("generate", "idx must be (B,T) int64 with T >= 1, got ", dtype_name(idx.dtype()), " ",
                         idx.shape());
}

// Removes a GPT's caches when generation ends, by return or by exception.
struct CacheScope {
    GPT& model;
    CacheScope(GPT& m, int64_t batch_size) : model(m) { model.setup_caches(batch_size); }
    ~CacheScope() { model.remove_caches(); }
};

} // namespace

// True when every Block's attention is one of ember's, which keep caches.
static bool caches_supported(const Sequential& blocks) {
    for (const auto& [name, module] : blocks.named_children()) {
        const auto* block = dynamic_cast<const Block*>(module.get());
        if (!block || !(dynamic_cast<const MultiHeadAttention*>(block->sa.get()) ||
                        dynamic_cast<const BatchedMultiHeadAttention*>(block->sa.get())))
            return false;
    }
    return true;
}

Tensor GPT::generate(Tensor idx, int64_t max_new_tokens, double temperature, std::optional<int64_t> top_k,
                     Generator* generator, bool use_cache) {
    if (!use_cache || !caches_supported(*blocks))
        return nn::generate(*this, config.block_size, std::move(idx), max_new_tokens, temperature, top_k, generator);
    check_generate_args(config.block_size, idx, max_new_tokens, temperature, top_k);
    NoGradGuard no_grad;
    CacheScope caches(*this, idx.size(0));
    const int64_t block = config.block_size;
    return sample(std::move(idx), max_new_tokens, temperature, top_k, generator, [&](const Tensor& context) {
        const int64_t T = context.size(1);
        if (cached_ > 0 && T == cached_ + 1 && T <= block) // one new token after the cached ones
            return (*this)(context.slice(1, -1)).select(1, -1);
        // The prompt, or a context past block_size (cropped, so every
        // position moved): the whole of it, from empty caches.
        setup_caches(context.size(0));
        return (*this)(context.slice(1, -block)).select(1, -1);
    });
}

Tensor generate(Module& model, int64_t block_size, Tensor idx, int64_t max_new_tokens, double temperature,
                std::optional<int64_t> top_k, Generator* generator) {
    check_generate_args(block_size, idx, max_new_tokens, temperature, top_k);
    NoGradGuard no_grad;
    return sample(std::move(idx), max_new_tokens, temperature, top_k, generator, [&](const Tensor& context) {
        // Crop the context to the last block_size tokens; the logits of its last position.
        return model(context.slice(1, -block_size)).select(1, -1);
    });
}

} // namespace ember::nn
