// FeedForward, Block and GPTLanguageModel: see gpt.h. Each is gpt.py's
// class, line for line, after the checks of its arguments.
// Tests: tests/test_gpt.cpp.
#include "nn/gpt.h"

#include "core/autograd/autograd.h"
#include "nn/gpt_checks.h"

namespace ember::nn {

using internal::check_generate;
using internal::check_tokens;

FeedForward::FeedForward(int64_t n_embd, double dropout) : Module("FeedForward") {
    net =
        register_module("net", std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
                                   std::make_shared<Linear>(n_embd, 4 * n_embd), std::make_shared<ReLU>(),
                                   std::make_shared<Linear>(4 * n_embd, n_embd), std::make_shared<Dropout>(dropout)}));
}

Tensor FeedForward::forward(const Tensor& x) { return (*net)(x); }

Block::Block(int64_t n_embd, int64_t n_head, int64_t block_size, double dropout) : Module("Block") {
    if (n_head < 1 || n_embd / n_head < 1)
        fail<ValueError>("Block", "n_embd=", n_embd, " does not split into n_head=", n_head, " heads");
    const int64_t head_size = n_embd / n_head;
    sa = register_module("sa", std::make_shared<MultiHeadAttention>(n_head, head_size, n_embd, block_size, dropout));
    ffwd = register_module("ffwd", std::make_shared<FeedForward>(n_embd, dropout));
    ln1 = register_module("ln1", std::make_shared<LayerNorm>(n_embd));
    ln2 = register_module("ln2", std::make_shared<LayerNorm>(n_embd));
}

Tensor Block::forward(const Tensor& input) {
    Tensor x = input;           // (B,T,C)
    x = x + (*sa)((*ln1)(x));   // communication
    x = x + (*ffwd)((*ln2)(x)); // computation
    return x;
}

namespace {

void check_config(const GPTConfig& c) {
    if (c.vocab_size < 1 || c.block_size < 1 || c.n_layer < 0)
        fail<ValueError>("GPTLanguageModel",
                         "vocab_size and block_size must be positive and n_layer non-negative, got ", c.vocab_size,
                         ", ", c.block_size, ", ", c.n_layer);
}

} // namespace

GPTLanguageModel::GPTLanguageModel(const GPTConfig& c) : Module("GPTLanguageModel"), config(c) {
    check_config(c);
    token_embedding_table =
        register_module("token_embedding_table", std::make_shared<Embedding>(c.vocab_size, c.n_embd));
    position_embedding_table =
        register_module("position_embedding_table", std::make_shared<Embedding>(c.block_size, c.n_embd));
    blocks = register_module("blocks", std::make_shared<Sequential>());
    for (int64_t i = 0; i < c.n_layer; ++i)
        blocks->push_back(std::make_shared<Block>(c.n_embd, c.n_head, c.block_size, c.dropout));
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.n_embd)); // final layer norm
    lm_head = register_module("lm_head", std::make_shared<Linear>(c.n_embd, c.vocab_size));

    // gpt.py's _init_weights (the video's version of the file does without):
    // self.apply visits the submodules children first, drawing as it goes
    apply(internal::gpt_init_weights);
}

GPTOutput GPTLanguageModel::forward(const Tensor& idx, const Tensor& targets) {
    check_tokens("GPTLanguageModel", idx, targets, config.block_size);
    const int64_t B = idx.size(0), T = idx.size(1);

    // idx and targets are both (B,T) tensors of integers
    Tensor tok_emb = (*token_embedding_table)(idx);          // (B,T,C)
    Tensor pos_emb = (*position_embedding_table)(arange(T)); // (T,C)
    Tensor x = tok_emb + pos_emb;                            // (B,T,C)
    x = (*blocks)(x);                                        // (B,T,C)
    x = (*ln_f)(x);                                          // (B,T,C)
    Tensor logits = (*lm_head)(x);                           // (B,T,vocab_size)

    Tensor loss;
    if (targets.defined()) {
        const int64_t C = logits.size(2);
        logits = logits.view({B * T, C});
        loss = cross_entropy(logits, targets.view({B * T}));
    }
    return {logits, loss};
}

Tensor GPTLanguageModel::generate(Tensor idx, int64_t max_new_tokens) {
    check_generate("GPTLanguageModel", idx, max_new_tokens);
    // idx is (B,T) array of indices in the current context
    for (int64_t i = 0; i < max_new_tokens; ++i) {
        // crop idx to the last block_size tokens
        Tensor idx_cond = idx.slice(1, -config.block_size);
        // get the predictions
        Tensor logits = forward(idx_cond, Tensor()).logits;
        // focus only on the last time step
        logits = logits.select(1, -1); // becomes (B,C)
        // apply softmax to get probabilities
        Tensor probs = softmax(logits, -1); // (B,C)
        // sample from the distribution
        Tensor idx_next = multinomial(probs, 1); // (B,1)
        // append sampled index to the running sequence
        idx = cat({idx, idx_next}, 1); // (B,T+1)
    }
    return idx;
}

} // namespace ember::nn
