// The notebooks' attention classes: see attention.h. Each forward is its
// notebook's, line for line, after a check of the input's shape where
// the class has one.
// Tests: tests/test_attention.cpp.
#include "nn/attention.h"

#include <cmath>

namespace ember::nn {

namespace {

// Checks that x is (B,T,C) with C = channels and, when the layer has a mask
// of max_T positions, T <= max_T (max_T 0: no mask, any T).
void check_input(const char* op, const Tensor& x, int64_t channels, int64_t max_T = 0,
                 const char* limit_name = nullptr) {
    if (x.dim() != 3 || x.size(2) != channels)
        fail<ShapeError>(op, "expects input (B,T,C) with C=", channels, ", got ", x.shape());
    if (max_T > 0 && x.size(1) > max_T)
        fail<ShapeError>(op, "sequence length T=", x.size(1), " exceeds ", limit_name, "=", max_T, " (input ",
                         x.shape(), "); the mask only covers ", max_T, " positions");
}

void check_heads(const char* op, int64_t d_out, int64_t num_heads) {
    if (num_heads < 1 || d_out < 1 || d_out % num_heads != 0)
        fail<ValueError>(op, "d_out=", d_out, " must be positive and divisible by num_heads=", num_heads);
}

} // namespace

// ---- the lecture's Head and MultiHeadAttention (gpt.py) -----------------------------------

Head::Head(int64_t n_embd, int64_t head_size, int64_t block_size, double p) : Module("Head") {
    if (n_embd < 1 || head_size < 1 || block_size < 1)
        fail<ValueError>("Head", "n_embd, head_size and block_size must be positive, got ", n_embd, ", ", head_size,
                         ", ", block_size);
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
    // How much each position wants from each other one: (B,T,hs) @ (B,hs,T)
    // -> (B,T,T), scaled by hs^-0.5 so that the scores' variance stays near
    // 1 and softmax does not saturate; masked, so position t sees only
    // positions <= t; softmax makes each row weights that sum to 1
    Tensor wei = matmul(q, k.transpose(-2, -1)) * std::pow(k.size(-1), -0.5);      // (B,T,T)
    wei = wei.masked_fill(tril.index({Slice(0, T), Slice(0, T)}) == 0, -INFINITY); // (B,T,T)
    wei = softmax(wei, -1);                                                        // (B,T,T)
    wei = (*dropout)(wei);
    // Each position's output: the weighted mean of the values
    Tensor v = (*value)(x);      // (B,T,hs)
    Tensor out = matmul(wei, v); // (B,T,T) @ (B,T,hs) -> (B,T,hs)
    return out;
}

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
    for (const auto& [name, h] : heads->named_children()) outs.push_back((*h)(x)); // NH x (B,T,hs)
    Tensor out = cat(outs, -1);                                                    // (B,T,NH*hs)
    out = (*dropout)((*proj)(out));                                                // (B,T,C)
    return out;
}

// ---- Raschka's MultiHeadAttention (ch. 3) -------------------------------------------------

BatchedMultiHeadAttention::BatchedMultiHeadAttention(int64_t d_in, int64_t d_out_, int64_t context_length, double p,
                                                     int64_t num_heads_, bool qkv_bias)
    : Module("BatchedMultiHeadAttention"), d_out(d_out_), num_heads(num_heads_),
      head_size(num_heads_ > 0 ? d_out_ / num_heads_ : 0) {
    check_heads("BatchedMultiHeadAttention", d_out, num_heads);
    if (d_in < 1 || context_length < 1)
        fail<ValueError>("BatchedMultiHeadAttention", "d_in and context_length must be positive, got ", d_in, " and ",
                         context_length);
    W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
    W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
    W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
    out_proj = register_module("out_proj", std::make_shared<Linear>(d_out, d_out)); // combines the heads' outputs
    dropout = register_module("dropout", std::make_shared<Dropout>(p));
    mask = register_buffer("mask", triu(ones({context_length, context_length}), 1));
}

Tensor BatchedMultiHeadAttention::forward(const Tensor& x) {
    check_input("BatchedMultiHeadAttention", x, W_query->in_features, mask.size(0), "context_length");
    const int64_t b = x.size(0), num_tokens = x.size(1);
    Tensor keys = (*W_key)(x); // (b, num_tokens, d_out)
    Tensor queries = (*W_query)(x);
    Tensor values = (*W_value)(x);

    // (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_size): a view
    keys = keys.view({b, num_tokens, num_heads, head_size});
    values = values.view({b, num_tokens, num_heads, head_size});
    queries = queries.view({b, num_tokens, num_heads, head_size});

    // (b, num_tokens, num_heads, head_size) -> (b, num_heads, num_tokens, head_size)
    keys = keys.transpose(1, 2);
    queries = queries.transpose(1, 2);
    values = values.transpose(1, 2);

    // Every head's scores: (b, num_heads, num_tokens, num_tokens)
    Tensor attn_scores = matmul(queries, keys.transpose(2, 3));
    // The mask's first num_tokens rows and columns, as booleans; true is hidden
    Tensor mask_bool = mask.to(kBool).index({Slice(0, num_tokens), Slice(0, num_tokens)});
    attn_scores.masked_fill_(mask_bool, -INFINITY);

    Tensor attn_weights = softmax(attn_scores / std::pow(keys.size(-1), 0.5), -1);
    attn_weights = (*dropout)(attn_weights);

    // (b, num_heads, num_tokens, head_size) -> (b, num_tokens, num_heads, head_size)
    Tensor context_vec = matmul(attn_weights, values).transpose(1, 2);
    // The heads side by side: d_out = num_heads * head_size
    context_vec = context_vec.contiguous().view({b, num_tokens, d_out});
    context_vec = (*out_proj)(context_vec);
    return context_vec;
}

// ---- "Implementing Multi-head Attention": MultiHeadAttention and V2 ------------------------

QKVAttention::QKVAttention(int64_t d_model_, int64_t n_head_)
    : Module("QKVAttention"), d_model(d_model_), n_head(n_head_), head_size(n_head_ > 0 ? d_model_ / n_head_ : 0) {
    check_heads("QKVAttention", d_model, n_head);
    Q = register_module("Q", std::make_shared<Linear>(d_model, d_model));
    K = register_module("K", std::make_shared<Linear>(d_model, d_model));
    V = register_module("V", std::make_shared<Linear>(d_model, d_model));
    O = register_module("O", std::make_shared<Linear>(d_model, d_model)); // remixes the heads
}

Tensor QKVAttention::forward(const Tensor& x) {
    check_input("QKVAttention", x, d_model);
    const int64_t batch_size = x.size(0), seq_len = x.size(1);

    Tensor queries = (*Q)(x); // (batch_size, seq_len, d_model)
    Tensor keys = (*K)(x);
    Tensor values = (*V)(x);

    // (batch_size, seq_len, d_model) -> (batch_size, n_head, seq_len, head_size)
    keys = keys.reshape({batch_size, seq_len, n_head, head_size}).transpose(1, 2);
    queries = queries.reshape({batch_size, seq_len, n_head, head_size}).transpose(1, 2);
    values = values.reshape({batch_size, seq_len, n_head, head_size}).transpose(1, 2);

    Tensor scores = matmul(queries, keys.transpose(-1, -2)) / std::pow(head_size, 0.5);
    Tensor self_attn = softmax(scores, -1); // (batch_size, n_head, seq_len, seq_len)
    Tensor out = matmul(self_attn, values); // (batch_size, n_head, seq_len, head_size)

    out = out.transpose(1, 2); // (batch_size, seq_len, n_head, head_size)
    out = out.reshape({batch_size, seq_len, d_model});

    out = (*O)(out); // (batch_size, seq_len, d_model)
    return out;
}

FusedQKVAttention::FusedQKVAttention(int64_t d_model_, int64_t n_head_)
    : Module("FusedQKVAttention"), d_model(d_model_), n_head(n_head_), head_size(n_head_ > 0 ? d_model_ / n_head_ : 0) {
    check_heads("FusedQKVAttention", d_model, n_head);
    // Q, K and V of every head in one Linear
    qkv_linear = register_module("qkv_linear", std::make_shared<Linear>(d_model, d_model * 3));
    O = register_module("O", std::make_shared<Linear>(d_model, d_model));
}

Tensor FusedQKVAttention::forward(const Tensor& x) {
    check_input("FusedQKVAttention", x, d_model);
    const int64_t batch_size = x.size(0), seq_len = x.size(1);
    Tensor qkv = (*qkv_linear)(x); // (batch_size, seq_len, d_model * 3)
    qkv = qkv.reshape({batch_size, seq_len, n_head, head_size * 3});
    qkv = qkv.transpose(1, 2); // (batch_size, n_head, seq_len, head_size * 3)

    std::vector<Tensor> parts = qkv.chunk(3, -1); // each (batch_size, n_head, seq_len, head_size)
    const Tensor &queries = parts[0], &keys = parts[1], &values = parts[2];
    Tensor scores = matmul(queries, keys.transpose(-1, -2)) / std::pow(head_size, 0.5);
    Tensor self_attn = softmax(scores, -1); // (batch_size, n_head, seq_len, seq_len)

    Tensor out = matmul(self_attn, values); // (batch_size, n_head, seq_len, head_size)
    out = out.transpose(1, 2);              // (batch_size, seq_len, n_head, head_size)
    out = out.reshape({batch_size, seq_len, d_model});
    out = (*O)(out);
    return out;
}

} // namespace ember::nn
