// Head, MultiHeadAttention, BatchedMultiHeadAttention: see attention.h.
// Each forward is the notebook's, line for line, with the shapes beside it;
// the scale, mask and softmax lines, quoted in comments, run as one op.
// Tests: tests/test_attention.cpp.
#include "nn/attention.h"

#include <cmath>

#include "core/autograd/autograd.h"

namespace ember::nn {

// Checks x is (B,T,C) with C = channels, and that its T positions after the
// `start` already cached fit in max_T.
static void check_input(const char* op, const Tensor& x, int64_t channels, int64_t start, int64_t max_T,
                        const char* limit_name) {
    if (x.dim() != 3 || x.size(2) != channels)
        fail<ShapeError>(op, "expects input (B,T,C) with C=", channels, ", got ", x.shape());
    if (start + x.size(1) > max_T) {
        if (start == 0)
            fail<ShapeError>(op, "sequence length T=", x.size(1), " exceeds ", limit_name, "=", max_T, " (input ",
                             x.shape(), "); the mask only covers ", max_T, " positions");
        fail<ShapeError>(op, "T=", x.size(1), " new positions after the ", start, " cached exceed ", limit_name, "=",
                         max_T, " (input ", x.shape(), ")");
    }
}

std::pair<Tensor, Tensor> KVCache::append(const Tensor& k_new, const Tensor& v_new, int64_t time, const char* op) {
    const int64_t T = k_new.size(time), capacity = k.size(time);
    if (length + T > capacity)
        fail<ShapeError>(op, "the key/value cache holds ", capacity, " positions; ", length, " are cached and ", T,
                         " more do not fit");
    for (int64_t d = 0; d < k.dim(); ++d)
        if (d != time && (k_new.size(d) != k.size(d) || v_new.size(d) != v.size(d)))
            fail<ShapeError>(op, "new keys ", k_new.shape(), " and values ", v_new.shape(),
                             " do not match the cache's ", k.shape(), " (set up for another batch size?)");
    NoGradGuard no_grad; // the cache is data, not part of any graph
    k.narrow(time, length, T).copy_(k_new);
    v.narrow(time, length, T).copy_(v_new);
    length += T;
    return {k.narrow(time, 0, length), v.narrow(time, 0, length)};
}

// ---- Head --------------------------------------------------------------------------------

Head::Head(int64_t n_embd, int64_t head_size, int64_t block_size, double p, bool flash_attention)
    : Module("Head"), flash(flash_attention) {
    if (n_embd < 1 || head_size < 1 || block_size < 1)
        fail<ValueError>("Head", "n_embd, head_size and block_size must be positive, got ", n_embd, ", ", head_size,
                         ", ", block_size);
    // Registration order is PyTorch's, so the same seed draws the same weights.
    key = register_module("key", std::make_shared<Linear>(n_embd, head_size, false));
    query = register_module("query", std::make_shared<Linear>(n_embd, head_size, false));
    value = register_module("value", std::make_shared<Linear>(n_embd, head_size, false));
    tril = register_buffer("tril", ember::tril(ones({block_size, block_size})));
    dropout = register_module("dropout", std::make_shared<Dropout>(p));
}

void Head::setup_cache(int64_t batch_size) {
    if (batch_size < 1) fail<ValueError>("Head", "setup_cache needs a positive batch size, got ", batch_size);
    const Shape shape{batch_size, tril.size(0), key->out_features};
    if (cache && cache->k.shape() == shape) cache->length = 0; // empty again, its memory kept
    else cache = KVCache{zeros(shape, key->weight.dtype()), zeros(shape, key->weight.dtype())};
}

Tensor Head::forward(const Tensor& x) {
    // With a cache, x holds the positions after the `start` cached ones.
    const int64_t start = cache ? cache->length : 0;
    check_input("Head", x, key->in_features, start, tril.size(0), "block_size");
    const int64_t T = x.size(1), S = start + T;
    Tensor k = (*key)(x);   // (B,T,hs)
    Tensor q = (*query)(x); // (B,T,hs)
    Tensor v = (*value)(x); // (B,T,hs); the notebook computes it last, to the same effect
    if (cache) std::tie(k, v) = cache->append(k, v, 1, "Head"); // (B,S,hs): every position so far
    if (flash && !keep_attention) {
        // The lines below in one op, scaled by hs^-0.5 and causal, the weights never stored.
        Tensor allowed = start == 0 ? Tensor() : tril.index({Slice(start, S), Slice(0, S)}) != 0;
        return scaled_dot_product_attention(q, k, v, allowed, is_training() ? dropout->p : 0.0, start == 0);
    }
    // Affinities: (B,T,hs) @ (B,hs,S) -> (B,T,S), scaled by hs^-0.5 so that
    // their variance stays near 1 and softmax does not saturate; causal, so
    // position t may only look at positions <= t. The notebook's three lines
    //   wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5
    //   wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
    //   wei = F.softmax(wei, dim=-1)
    // run as one pass, with the same bits (scaled_masked_softmax, core/ops/softmax.cpp).
    // (With a cache, the queries are positions start..S-1: those rows of tril.)
    Tensor wei = scaled_masked_softmax(matmul(q, k.transpose(-2, -1)), tril.index({Slice(start, S), Slice(0, S)}) == 0,
                                       std::pow(static_cast<double>(k.size(-1)), -0.5)); // (B,T,S)
    wei = (*dropout)(wei);
    if (keep_attention) attention = wei.detach();
    return matmul(wei, v); // (B,T,S) @ (B,S,hs) -> (B,T,hs)
}

// ---- MultiHeadAttention (a list of heads) ----------------------------------------------------

MultiHeadAttention::MultiHeadAttention(int64_t num_heads, int64_t head_size, int64_t n_embd, int64_t block_size,
                                       double p, bool flash)
    : Module("MultiHeadAttention") {
    if (num_heads < 1 || head_size < 1)
        fail<ValueError>("MultiHeadAttention", "num_heads and head_size must be positive, got ", num_heads, " and ",
                         head_size);
    heads = register_module("heads", std::make_shared<ModuleList>());
    for (int64_t h = 0; h < num_heads; ++h)
        heads->push_back(std::make_shared<Head>(n_embd, head_size, block_size, p, flash));
    proj = register_module("proj", std::make_shared<Linear>(head_size * num_heads, n_embd));
    dropout = register_module("dropout", std::make_shared<Dropout>(p));
}

Tensor MultiHeadAttention::forward(const Tensor& x) {
    std::vector<Tensor> outs;
    for (const auto& [name, head] : heads->named_children()) outs.push_back((*head)(x)); // NH x (B,T,hs)
    Tensor out = cat(outs, -1);                                                          // (B,T,NH*hs)
    return (*dropout)((*proj)(out));                                                     // (B,T,C)
}

// ---- BatchedMultiHeadAttention -------------------------------------------------------------------

static const AttentionConfig& checked(const AttentionConfig& c) {
    if (c.num_heads < 1 || c.d_out < 1 || c.d_out % c.num_heads != 0)
        fail<ValueError>("BatchedMultiHeadAttention", "d_out=", c.d_out,
                         " must be positive and divisible by num_heads=", c.num_heads);
    if (c.d_in < 1 || c.context_length < 1)
        fail<ValueError>("BatchedMultiHeadAttention", "d_in and context_length must be positive, got ", c.d_in, " and ",
                         c.context_length);
    return c;
}

BatchedMultiHeadAttention::BatchedMultiHeadAttention(const AttentionConfig& c)
    : Module("BatchedMultiHeadAttention"), config(checked(c)), head_dim(c.d_out / c.num_heads) {
    if (c.fused_qkv) {
        W_qkv = register_module("W_qkv", std::make_shared<Linear>(c.d_in, 3 * c.d_out, c.qkv_bias));
    } else {
        // Raschka's order: query, key, value.
        W_query = register_module("W_query", std::make_shared<Linear>(c.d_in, c.d_out, c.qkv_bias));
        W_key = register_module("W_key", std::make_shared<Linear>(c.d_in, c.d_out, c.qkv_bias));
        W_value = register_module("W_value", std::make_shared<Linear>(c.d_in, c.d_out, c.qkv_bias));
    }
    out_proj = register_module("out_proj", std::make_shared<Linear>(c.d_out, c.d_out, c.out_bias));
    dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout));
    if (c.out_dropout > 0) out_dropout = register_module("out_dropout", std::make_shared<Dropout>(c.out_dropout));
    if (c.causal) mask = register_buffer("mask", triu(ones({c.context_length, c.context_length}), 1));
}

BatchedMultiHeadAttention::BatchedMultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double p,
                                                     int64_t num_heads, bool qkv_bias)
    : BatchedMultiHeadAttention(AttentionConfig{.d_in = d_in,
                                                .d_out = d_out,
                                                .context_length = context_length,
                                                .num_heads = num_heads,
                                                .dropout = p,
                                                .qkv_bias = qkv_bias}) {}

void BatchedMultiHeadAttention::setup_cache(int64_t batch_size) {
    if (batch_size < 1)
        fail<ValueError>("BatchedMultiHeadAttention", "setup_cache needs a positive batch size, got ", batch_size);
    const Shape shape{batch_size, config.num_heads, config.context_length, head_dim};
    const DType dtype = out_proj->weight.dtype();
    if (cache && cache->k.shape() == shape) cache->length = 0; // empty again, its memory kept
    else cache = KVCache{zeros(shape, dtype), zeros(shape, dtype)};
}

std::array<Tensor, 3> BatchedMultiHeadAttention::project(const Tensor& x) const {
    const int64_t B = x.size(0), T = x.size(1), NH = config.num_heads, hs = head_dim;
    if (config.fused_qkv) {
        // (B,T,3 d_out) -> (B,T,NH,3 hs) -> (B,NH,T,3 hs), then [q | k | v] per head.
        Tensor qkv = (*W_qkv)(x).reshape({B, T, NH, 3 * hs}).transpose(1, 2);
        std::vector<Tensor> parts = qkv.chunk(3, -1);
        return {parts[0], parts[1], parts[2]};
    }
    // (B,T,d_out) -> (B,T,NH,hs) -> (B,NH,T,hs): a view, then a transpose.
    Tensor k = (*W_key)(x).view({B, T, NH, hs}).transpose(1, 2);
    Tensor q = (*W_query)(x).view({B, T, NH, hs}).transpose(1, 2);
    Tensor v = (*W_value)(x).view({B, T, NH, hs}).transpose(1, 2);
    return {q, k, v};
}

Tensor BatchedMultiHeadAttention::forward(const Tensor& x) {
    // With a cache, x holds the positions after the `start` cached ones.
    const int64_t start = cache ? cache->length : 0;
    check_input("BatchedMultiHeadAttention", x, config.d_in, start, config.context_length, "context_length");
    const int64_t S = start + x.size(1);
    auto [q, k, v] = project(x);                                                     // each (B,NH,T,hs)
    if (cache) std::tie(k, v) = cache->append(k, v, 2, "BatchedMultiHeadAttention"); // (B,NH,S,hs)
    // The queries are positions start..S-1: those rows of the causal mask.
    Tensor masked = config.causal ? mask.index({Slice(start, S), Slice(0, S)}).to(kBool) : Tensor();
    return attend(q, k, v, masked, config.causal && start == 0);
}

Tensor BatchedMultiHeadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& masked,
                                         bool square_causal) {
    const int64_t B = q.size(0), T = q.size(2), hs = head_dim;
    const double p = is_training() ? dropout->p : 0.0;
    Tensor context; // (B,NH,T,hs)
    if (config.flash && !keep_attention) {
        // The lines below in one op (scale 1/sqrt(hs)), the weights never stored;
        // the plain causal mask as is_causal, which skips the blocks above the diagonal.
        Tensor allowed = square_causal || !masked.defined() ? Tensor() : masked == false;
        context = scaled_dot_product_attention(q, k, v, allowed, p, square_causal);
    } else {
        Tensor scores = matmul(q, k.transpose(-2, -1)); // (B,NH,T,hs) @ (B,NH,hs,S) -> (B,NH,T,S)
        // Raschka's lines
        //   attn_scores.masked_fill_(mask_bool, -torch.inf)
        //   attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        // as one pass, with the same bits (scaled_masked_softmax, core/ops/softmax.cpp).
        Tensor weights = scaled_masked_softmax(scores, masked, std::pow(static_cast<double>(hs), 0.5),
                                               ScaleOp::divide); // (B,NH,T,S)
        weights = (*dropout)(weights);
        if (keep_attention) attention = weights.detach();
        context = matmul(weights, v); // (B,NH,T,S) @ (B,NH,S,hs) -> (B,NH,T,hs)
    }
    // (B,NH,T,hs) -> (B,T,NH,hs) -> (B,T,d_out): the transpose puts each
    // token's heads side by side before they merge.
    Tensor out = (*out_proj)(context.transpose(1, 2).reshape({B, T, config.d_out}));
    return out_dropout ? (*out_dropout)(out) : out;
}

} // namespace ember::nn
