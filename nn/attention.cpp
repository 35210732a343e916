// Head, MultiHeadAttention, BatchedMultiHeadAttention: see attention.h.
// Each forward is the notebook's, line for line, with the shapes beside it;
// the scale, mask and softmax lines, quoted in comments, run as one op.
// Tests: tests/test_attention.cpp.
#include "nn/attention.h"

#include <cmath>

namespace ember::nn {

// Checks x is (B,T,C) with C = channels and T <= max_T.
static void check_input(const char* op, const Tensor& x, int64_t channels, int64_t max_T, const char* limit_name) {
    if (x.dim() != 3 || x.size(2) != channels)
        fail<ShapeError>(op, "expects input (B,T,C) with C=", channels, ", got ", x.shape());
    if (x.size(1) > max_T)
        fail<ShapeError>(op, "sequence length T=", x.size(1), " exceeds ", limit_name, "=", max_T, " (input ",
                         x.shape(), "); the mask only covers ", max_T, " positions");
}

// ---- Head --------------------------------------------------------------------------------

Head::Head(int64_t n_embd, int64_t head_size, int64_t block_size, double p) : Module("Head") {
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

Tensor Head::forward(const Tensor& x) {
    check_input("Head", x, key->in_features, tril.size(0), "block_size");
    const int64_t T = x.size(1);
    Tensor k = (*key)(x);   // (B,T,hs)
    Tensor q = (*query)(x); // (B,T,hs)
    // Affinities: (B,T,hs) @ (B,hs,T) -> (B,T,T), scaled by hs^-0.5 so that
    // their variance stays near 1 and softmax does not saturate; causal, so
    // position t may only look at positions <= t. The notebook's three lines
    //   wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5
    //   wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
    //   wei = F.softmax(wei, dim=-1)
    // run as one pass, with the same bits (scaled_masked_softmax, core/ops/softmax.cpp).
    Tensor wei = scaled_masked_softmax(matmul(q, k.transpose(-2, -1)), tril.index({Slice(0, T), Slice(0, T)}) == 0,
                                       std::pow(static_cast<double>(k.size(-1)), -0.5)); // (B,T,T)
    wei = (*dropout)(wei);
    if (keep_attention) attention = wei.detach();
    Tensor v = (*value)(x); // (B,T,hs)
    return matmul(wei, v);  // (B,T,T) @ (B,T,hs) -> (B,T,hs)
}

// ---- MultiHeadAttention (a list of heads) ----------------------------------------------------

MultiHeadAttention::MultiHeadAttention(int64_t num_heads, int64_t head_size, int64_t n_embd, int64_t block_size,
                                       double p)
    : Module("MultiHeadAttention") {
    if (num_heads < 1 || head_size < 1)
        fail<ValueError>("MultiHeadAttention", "num_heads and head_size must be positive, got ", num_heads, " and ",
                         head_size);
    heads = register_module("heads", std::make_shared<ModuleList>());
    for (int64_t h = 0; h < num_heads; ++h) heads->push_back(std::make_shared<Head>(n_embd, head_size, block_size, p));
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

Tensor BatchedMultiHeadAttention::forward(const Tensor& x) {
    check_input("BatchedMultiHeadAttention", x, config.d_in, config.context_length, "context_length");
    const int64_t B = x.size(0), T = x.size(1), NH = config.num_heads, hs = head_dim;
    Tensor q, k, v; // each (B,NH,T,hs)
    if (config.fused_qkv) {
        // (B,T,3 d_out) -> (B,T,NH,3 hs) -> (B,NH,T,3 hs), then [q | k | v] per head.
        Tensor qkv = (*W_qkv)(x).reshape({B, T, NH, 3 * hs}).transpose(1, 2);
        std::vector<Tensor> parts = qkv.chunk(3, -1);
        q = parts[0];
        k = parts[1];
        v = parts[2];
    } else {
        // (B,T,d_out) -> (B,T,NH,hs) -> (B,NH,T,hs): a view, then a transpose.
        k = (*W_key)(x).view({B, T, NH, hs}).transpose(1, 2);
        q = (*W_query)(x).view({B, T, NH, hs}).transpose(1, 2);
        v = (*W_value)(x).view({B, T, NH, hs}).transpose(1, 2);
    }
    Tensor scores = matmul(q, k.transpose(-2, -1)); // (B,NH,T,hs) @ (B,NH,hs,T) -> (B,NH,T,T)
    // Raschka's lines
    //   attn_scores.masked_fill_(mask_bool, -torch.inf)
    //   attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
    // as one pass, with the same bits (scaled_masked_softmax, core/ops/softmax.cpp).
    Tensor causal = config.causal ? mask.index({Slice(0, T), Slice(0, T)}).to(kBool) : Tensor();
    Tensor weights = scaled_masked_softmax(scores, causal, std::pow(static_cast<double>(hs), 0.5),
                                           ScaleOp::divide); // (B,NH,T,T)
    weights = (*dropout)(weights);
    if (keep_attention) attention = weights.detach();
    // (B,NH,T,T) @ (B,NH,T,hs) -> (B,NH,T,hs) -> (B,T,NH,hs) -> (B,T,d_out):
    // the transpose puts each token's heads side by side before they merge.
    Tensor context = matmul(weights, v).transpose(1, 2).reshape({B, T, config.d_out});
    Tensor out = (*out_proj)(context);
    return out_dropout ? (*out_dropout)(out) : out;
}

} // namespace ember::nn
