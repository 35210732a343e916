// The fast GPT: see fast_gpt.h. Its forward passes are nanoGPT's model.py;
// the lecture's lines they stand for are in nn/attention.cpp and nn/gpt.cpp.
// Tests: tests/test_fast_gpt.cpp.
#include "nn/fast_gpt.h"

#include <cmath>

#include "core/autograd/autograd.h"
#include "core/autograd/checkpoint.h"
#include "nn/generate.h"
#include "nn/gpt_checks.h"
#include "nn/init.h"

namespace ember::nn::fast {

using internal::check_generate;
using internal::check_tokens;

GPTConfig GPTConfig::lecture(const nn::GPTConfig& c) {
    return {.vocab_size = c.vocab_size,
            .block_size = c.block_size,
            .n_embd = c.n_embd,
            .n_head = c.n_head,
            .n_layer = c.n_layer,
            .dropout = c.dropout,
            .bias = true,
            .qkv_bias = false,
            .lm_head_bias = true,
            .tie_weights = false,
            .embedding_dropout = false,
            .activation = Activation::relu};
}

namespace {

const GPTConfig& checked(const GPTConfig& c) {
    if (c.vocab_size < 1 || c.block_size < 1 || c.n_layer < 0)
        fail<ValueError>("fast::GPT", "vocab_size and block_size must be positive and n_layer non-negative, got ",
                         c.vocab_size, ", ", c.block_size, ", ", c.n_layer);
    if (c.n_head < 1 || c.n_embd < 1 || c.n_embd % c.n_head != 0)
        fail<ValueError>("fast::GPT", "n_embd=", c.n_embd, " must be positive and divisible by n_head=", c.n_head,
                         " (one projection splits it into the heads)");
    if (!(c.dropout >= 0.0 && c.dropout <= 1.0))
        fail<ValueError>("fast::GPT", "dropout must be between 0 and 1, got ", c.dropout);
    return c;
}

} // namespace

// ---- CausalSelfAttention --------------------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(const GPTConfig& c)
    : Module("CausalSelfAttention"), n_head(c.n_head), n_embd(c.n_embd), flash(c.flash) {
    // the queries, keys and values of all heads in one product
    c_attn = register_module("c_attn", std::make_shared<Linear>(c.n_embd, 3 * c.n_embd, c.qkv_bias));
    // the heads' outputs, side by side, projected back
    c_proj = register_module("c_proj", std::make_shared<Linear>(c.n_embd, c.n_embd, c.bias));
    attn_dropout = register_module("attn_dropout", std::make_shared<Dropout>(c.dropout));
    resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(c.dropout));
    mask = register_buffer("mask", triu(ones({c.block_size, c.block_size}), 1).to(kBool), /*persistent=*/false);
}

// Note [heads first]
// nanoGPT lays the heads out as (B,NH,T,hs); here they are (NH,B,T,hs),
// head-major. Attention computes each (batch row, head) pair on its own, so
// the order of those two dims changes no number, except the dropout masks:
// one mask over (NH,B,T,T) is drawn in the order gpt.py draws them, one
// Head's (B,T,T) after another. So with dropout on, too, this model
// computes what gpt.py's classes compute, draw for draw.

std::array<Tensor, 3> CausalSelfAttention::project_qkv(const Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), C = n_embd, head_size = C / n_head;
    // (B,T,3C) -> q, k, v (B,T,C): columns h*hs .. (h+1)*hs of each are head h's
    std::vector<Tensor> qkv = (*c_attn)(x).split(C, 2);
    // (B,T,C) -> (B,T,NH,hs) -> (NH,B,T,hs): views, nothing copied (Note [heads first])
    Tensor q = qkv[0].view({B, T, n_head, head_size}).permute({2, 0, 1, 3});
    Tensor k = qkv[1].view({B, T, n_head, head_size}).permute({2, 0, 1, 3});
    Tensor v = qkv[2].view({B, T, n_head, head_size}).permute({2, 0, 1, 3});
    return {q, k, v};
}

// The queries are positions start .. start+T-1: those rows of the mask, (T,S).
static Tensor mask_rows(const Tensor& mask, int64_t start, int64_t T, int64_t S) {
    return mask.index({Slice(start, start + T), Slice(0, S)});
}

Tensor CausalSelfAttention::weights(const Tensor& q, const Tensor& k, int64_t start) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(k.size(-1)));
    // (NH,B,T,hs) @ (NH,B,hs,S) -> (NH,B,T,S); scale, mask and softmax in one op
    return scaled_masked_softmax(matmul(q, k.transpose(-2, -1)), mask_rows(mask, start, q.size(2), k.size(2)), scale);
}

Tensor CausalSelfAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v, int64_t start) {
    const int64_t T = q.size(2), S = k.size(2);
    if (flash) {
        // softmax(q @ k^T / sqrt(hs) + mask) @ v with dropout on the weights,
        // in one op that never stores them (docs/flash_attention.md). A plain
        // causal square is is_causal, which skips the blocks above the diagonal.
        const double p = is_training() ? attn_dropout->p : 0.0;
        Generator* generator = attn_dropout->generator.get(); // null: the default generator, as the Dropout's
        if (start == 0 && T == S)
            return scaled_dot_product_attention(q, k, v, Tensor(), p, /*is_causal=*/true, std::nullopt, generator);
        return scaled_dot_product_attention(q, k, v, mask_rows(mask, start, T, S) == false, p, false, std::nullopt,
                                            generator);
    }
    // The same by the unfused ops.
    Tensor att = (*attn_dropout)(weights(q, k, start));
    return matmul(att, v); // (NH,B,T,S) @ (NH,B,S,hs) -> (NH,B,T,hs)
}

Tensor CausalSelfAttention::merge_and_project(const Tensor& y) {
    const int64_t B = y.size(1), T = y.size(2);
    // (NH,B,T,hs) -> (B,T,NH,hs) -> (B,T,C): each token's heads side by side.
    // A view when y is (B,T,NH,hs) in memory, as flash attention lays it
    // out (docs/flash_attention.md, "The code"); a copy after the unfused ops.
    Tensor merged = y.permute({1, 2, 0, 3}).reshape({B, T, n_embd});
    return (*resid_dropout)((*c_proj)(merged));
}

static void check_input(const Tensor& x, int64_t channels) {
    if (x.dim() != 3 || x.size(2) != channels)
        fail<ShapeError>("CausalSelfAttention", "expects input (B,T,C) with C=", channels, ", got ", x.shape());
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
    check_input(x, n_embd);
    if (x.size(1) > mask.size(0))
        fail<ShapeError>("CausalSelfAttention", "sequence length T=", x.size(1), " exceeds block_size=", mask.size(0),
                         " (input ", x.shape(), ")");
    auto [q, k, v] = project_qkv(x);
    return merge_and_project(attend(q, k, v, 0));
}

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache& cache, size_t layer) {
    check_input(x, n_embd);
    if (layer >= cache.k.size())
        fail<ValueError>("CausalSelfAttention", "the cache has ", cache.k.size(), " layers; layer ", layer,
                         " was asked for");
    Tensor& k_all = cache.k[layer];
    Tensor& v_all = cache.v[layer];
    const int64_t start = cache.length, T = x.size(1);
    if (x.size(0) != k_all.size(1) || start + T > k_all.size(2))
        fail<ShapeError>("CausalSelfAttention", "input ", x.shape(), " after ", start,
                         " cached positions does not fit the cache's ", k_all.shape());
    NoGradGuard no_grad; // the cache is data, not part of any graph
    auto [q, k, v] = project_qkv(x);
    k_all.narrow(2, start, T).copy_(k);
    v_all.narrow(2, start, T).copy_(v);
    // every position so far: (NH,B,start+T,hs)
    return merge_and_project(attend(q, k_all.narrow(2, 0, start + T), v_all.narrow(2, 0, start + T), start));
}

Tensor CausalSelfAttention::attention_weights(const Tensor& x) { return inspect(x).weights; }

AttentionInside CausalSelfAttention::inspect(const Tensor& x) {
    check_input(x, n_embd);
    auto [q, k, v] = project_qkv(x);
    // (NH,B,...) -> (B,NH,...), nanoGPT's order, for the caller
    return {q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), weights(q, k, 0).transpose(0, 1)};
}

// ---- MLP and Block ----------------------------------------------------------------------

MLP::MLP(const GPTConfig& c) : Module("MLP") {
    c_fc = register_module("c_fc", std::make_shared<Linear>(c.n_embd, 4 * c.n_embd, c.bias));
    if (c.activation == Activation::relu) act = register_module("act", std::make_shared<ReLU>());
    else act = register_module("act", std::make_shared<GELU>(c.activation == Activation::gelu ? "none" : "tanh"));
    c_proj = register_module("c_proj", std::make_shared<Linear>(4 * c.n_embd, c.n_embd, c.bias));
    dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout));
}

Tensor MLP::forward(const Tensor& x) { return (*dropout)((*c_proj)((*act)((*c_fc)(x)))); }

Block::Block(const GPTConfig& c) : Module("Block") {
    ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(Shape{c.n_embd}, 1e-5, true, c.bias));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(c));
    ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(Shape{c.n_embd}, 1e-5, true, c.bias));
    mlp = register_module("mlp", std::make_shared<MLP>(c));
}

Tensor Block::forward(const Tensor& input) {
    Tensor x = input;
    x = x + (*attn)((*ln_1)(x));
    x = x + (*mlp)((*ln_2)(x));
    return x;
}

Tensor Block::forward(const Tensor& input, KVCache& cache, size_t layer) {
    Tensor x = input;
    x = x + attn->forward((*ln_1)(x), cache, layer);
    x = x + (*mlp)((*ln_2)(x));
    return x;
}

// ---- GPT --------------------------------------------------------------------------------

GPT::GPT(const GPTConfig& c) : Module("GPT"), config(checked(c)) {
    transformer = register_module("transformer", std::make_shared<Module>("ModuleDict"));
    wte = transformer->register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd));
    wpe = transformer->register_module("wpe", std::make_shared<Embedding>(c.block_size, c.n_embd));
    drop = transformer->register_module("drop", std::make_shared<Dropout>(c.embedding_dropout ? c.dropout : 0.0));
    h = transformer->register_module("h", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<Block>(c));
    ln_f = transformer->register_module("ln_f", std::make_shared<LayerNorm>(Shape{c.n_embd}, 1e-5, true, c.bias));
    lm_head = register_module("lm_head", std::make_shared<Linear>(c.n_embd, c.vocab_size, c.lm_head_bias));
    // Weight tying: the token embedding is the output layer's weight (one
    // (V,C) matrix reads tokens in and scores them out).
    if (c.tie_weights) wte->weight = wte->replace_parameter("weight", lm_head->weight);

    // nanoGPT's init, drawn in its order: every Linear and Embedding (the
    // submodules children first), then the residual projections again with
    // a smaller std, so that the sum over 2 n_layer residual branches keeps
    // the stream's scale.
    apply(internal::gpt_init_weights);
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
    for (const auto& [name, p] : named_parameters())
        if (name.size() >= 13 && name.compare(name.size() - 13, 13, "c_proj.weight") == 0)
            init::normal_(p, 0.0, residual_std);
}

GPTOutput GPT::forward(const Tensor& idx, const Tensor& targets) {
    check_tokens("fast::GPT", idx, targets, config.block_size);
    const int64_t T = idx.size(1);
    Tensor tok_emb = (*wte)(idx);       // (B,T,C)
    Tensor pos_emb = (*wpe)(arange(T)); // (T,C)
    Tensor x = (*drop)(tok_emb + pos_emb);
    for (const auto& [name, block] : h->named_children()) {
        if (config.checkpoint_blocks && is_training()) // only x is kept; the block's insides are recomputed in backward
            x = checkpoint([block = block](const Tensor& in) { return (*block)(in); }, x, block->parameters());
        else x = (*block)(x); // (B,T,C)
    }
    x = (*ln_f)(x);
    Tensor logits = (*lm_head)(x); // (B,T,V)
    Tensor loss;
    if (targets.defined()) loss = cross_entropy(logits.view({-1, logits.size(-1)}), targets.reshape({-1}));
    return {logits, loss};
}

KVCache GPT::make_cache(int64_t batch_size) const {
    if (batch_size < 1) fail<ValueError>("fast::GPT", "make_cache needs a positive batch size, got ", batch_size);
    const Shape shape{config.n_head, batch_size, config.block_size,
                      config.n_embd / config.n_head}; // Note [heads first]
    KVCache cache;
    for (int64_t i = 0; i < config.n_layer; ++i) {
        cache.k.push_back(zeros(shape, lm_head->weight.dtype()));
        cache.v.push_back(zeros(shape, lm_head->weight.dtype()));
    }
    return cache;
}

Tensor GPT::forward(const Tensor& idx, KVCache& cache) {
    check_tokens("fast::GPT", idx, Tensor(), config.block_size, cache.length);
    if (cache.k.size() != static_cast<size_t>(config.n_layer))
        fail<ValueError>("fast::GPT", "the cache has ", cache.k.size(), " layers, the model ", config.n_layer,
                         " (make it with make_cache)");
    NoGradGuard no_grad;
    const int64_t start = cache.length, T = idx.size(1);
    Tensor x = (*drop)((*wte)(idx) + (*wpe)(arange(start, start + T))); // positions start .. start+T-1
    for (size_t i = 0; i < h->size(); ++i) x = h->at<Block>(i)->forward(x, cache, i);
    cache.length += T;
    return (*lm_head)((*ln_f)(x)); // (B,T,V)
}

Tensor GPT::generate(Tensor idx, int64_t max_new_tokens, double temperature, std::optional<int64_t> top_k,
                     Generator* generator, bool use_cache) {
    if (!use_cache)
        return nn::generate(*this, config.block_size, std::move(idx), max_new_tokens, temperature, top_k, generator);
    check_generate("fast::GPT", idx, max_new_tokens, temperature, top_k);
    NoGradGuard no_grad;
    const int64_t block = config.block_size;
    KVCache cache = make_cache(idx.size(0));
    for (int64_t i = 0; i < max_new_tokens; ++i) {
        const int64_t T = idx.size(1);
        Tensor logits;
        if (cache.length > 0 && T == cache.length + 1 && T <= block) {
            logits = forward(idx.slice(1, -1), cache); // the one new token, after the cached ones
        } else {
            // The prompt, or a context past block_size: cropped, so every
            // position moved; all of it again, from an empty cache.
            cache.length = 0;
            logits = forward(idx.slice(1, -block), cache);
        }
        idx = cat({idx, sample_next(logits.select(1, -1), temperature, top_k, generator)}, 1); // (B,T+1)
    }
    return idx;
}

std::vector<Tensor> GPT::attention_weights(const Tensor& idx) {
    std::vector<Tensor> weights;
    for (const AttentionInside& layer : inspect_attention(idx)) weights.push_back(layer.weights);
    return weights;
}

std::vector<AttentionInside> GPT::inspect_attention(const Tensor& idx) {
    check_tokens("fast::GPT", idx, Tensor(), config.block_size);
    // Eval mode for the run (no dropout), the caller's mode afterwards.
    struct EvalScope {
        Module& m;
        bool was_training;
        explicit EvalScope(Module& module) : m(module), was_training(module.is_training()) { m.eval(); }
        ~EvalScope() { m.train(was_training); }
    } eval_scope(*this);
    NoGradGuard no_grad;
    std::vector<AttentionInside> layers;
    Tensor x = (*drop)((*wte)(idx) + (*wpe)(arange(idx.size(1))));
    for (size_t i = 0; i < h->size(); ++i) {
        auto block = h->at<Block>(i);
        layers.push_back(block->attn->inspect((*block->ln_1)(x))); // q, k, v (B,NH,T,hs), weights (B,NH,T,T)
        x = (*block)(x);
    }
    return layers;
}

// ---- from the lecture's model -----------------------------------------------------------------

StateDict from_lecture(const StateDict& lecture) {
    StateDict out;
    auto copy = [&](const std::string& from, const std::string& to) { out.insert(to, lecture.at(from)); };
    copy("token_embedding_table.weight", "transformer.wte.weight");
    copy("position_embedding_table.weight", "transformer.wpe.weight");
    for (int64_t i = 0; lecture.contains("blocks." + std::to_string(i) + ".ln1.weight"); ++i) {
        const std::string from = "blocks." + std::to_string(i) + ".", to = "transformer.h." + std::to_string(i) + ".";
        copy(from + "ln1.weight", to + "ln_1.weight");
        copy(from + "ln1.bias", to + "ln_1.bias");
        // Head h's query weight (hs,C) becomes rows h*hs .. (h+1)*hs of the
        // queries' (C,C) block of c_attn.weight (3C,C); keys and values follow.
        std::vector<Tensor> queries, keys, values;
        for (int64_t hd = 0;; ++hd) {
            const std::string head = from + "sa.heads." + std::to_string(hd) + ".";
            if (!lecture.contains(head + "query.weight")) break;
            queries.push_back(lecture.at(head + "query.weight"));
            keys.push_back(lecture.at(head + "key.weight"));
            values.push_back(lecture.at(head + "value.weight"));
        }
        if (queries.empty())
            fail<ValueError>("from_lecture", "block ", i, " has no heads (no ", from, "sa.heads.0.query.weight)");
        std::vector<Tensor> rows = queries;
        rows.insert(rows.end(), keys.begin(), keys.end());
        rows.insert(rows.end(), values.begin(), values.end());
        out.insert(to + "attn.c_attn.weight", cat(rows, 0));
        copy(from + "sa.proj.weight", to + "attn.c_proj.weight");
        copy(from + "sa.proj.bias", to + "attn.c_proj.bias");
        copy(from + "ln2.weight", to + "ln_2.weight");
        copy(from + "ln2.bias", to + "ln_2.bias");
        copy(from + "ffwd.net.0.weight", to + "mlp.c_fc.weight");
        copy(from + "ffwd.net.0.bias", to + "mlp.c_fc.bias");
        copy(from + "ffwd.net.2.weight", to + "mlp.c_proj.weight");
        copy(from + "ffwd.net.2.bias", to + "mlp.c_proj.bias");
    }
    copy("ln_f.weight", "transformer.ln_f.weight");
    copy("ln_f.bias", "transformer.ln_f.bias");
    copy("lm_head.weight", "lm_head.weight");
    copy("lm_head.bias", "lm_head.bias");
    return out;
}

} // namespace ember::nn::fast
