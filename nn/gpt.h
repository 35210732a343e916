// The rest of the "Let's build GPT" lecture's gpt.py (its attention is in
// nn/attention.h): FeedForward, Block and GPTLanguageModel, line for line,
// with gpt.py's globals (block_size, dropout, ...) as arguments.
//
//   Block:             x = x + sa(ln1(x)); x = x + ffwd(ln2(x))      (pre-LayerNorm)
//   GPTLanguageModel:  tokens -> token + position embeddings -> blocks -> ln_f -> lm_head
//
// The file is gpt.py of karpathy/ng-video-lecture (the version with
// _init_weights, whose model class is GPTLanguageModel). With the same seed
// a model built here has the parameters PyTorch's gpt.py builds, to the
// bit. For speed (FlashAttention, a key/value cache, activation
// checkpointing, MPI) the same function runs in the fast model,
// nn/fast_gpt.h. docs/gpt.md walks the stages that lead here; tests in
// tests/test_gpt.cpp.
#pragma once

#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace ember::nn {

// gpt.py's FeedFoward (sic): "a simple linear layer followed by a
// non-linearity", Linear(n, 4n), ReLU, Linear(4n, n), Dropout, as a
// Sequential named `net` (parameters net.0.weight, net.2.bias, ...).
class FeedForward : public Module {
public:
    FeedForward(int64_t n_embd, double dropout);
    Tensor forward(const Tensor& x) override; // (B,T,C) -> (B,T,C)
    std::shared_ptr<Sequential> net;
};

// gpt.py's Block(n_embd, n_head): communication (attention) followed by
// computation (the MLP), each around a residual connection.
// Its layers are held as Modules, so that a layer of yours can take one's
// place: block.ln1 = block.replace_module("ln1", ...) (docs/extending.md).
class Block : public Module {
public:
    Block(int64_t n_embd, int64_t n_head, int64_t block_size, double dropout);
    // x (B,T,C) -> (B,T,C)
    Tensor forward(const Tensor& x) override;

    std::shared_ptr<Module> sa;       // MultiHeadAttention(n_head, n_embd / n_head)
    std::shared_ptr<Module> ffwd;     // FeedForward
    std::shared_ptr<Module> ln1, ln2; // LayerNorm(n_embd)
};

// gpt.py's hyperparameters that shape the model. gpt.py's own values are
// vocab_size 65 (tiny Shakespeare's characters), block_size 256, n_embd
// 384, n_head 6, n_layer 6, dropout 0.2: 10.8 M parameters.
struct GPTConfig {
    int64_t vocab_size = 65;
    int64_t block_size = 8; // the longest context
    int64_t n_embd = 32;
    int64_t n_head = 4;
    int64_t n_layer = 3;
    double dropout = 0.0;
};

struct GPTOutput {
    Tensor logits; // (B,T,vocab_size); gpt.py's (B*T,vocab_size) view when targets were given
    Tensor loss;   // mean cross-entropy against the targets; undefined without targets
};

class GPTLanguageModel : public Module {
public:
    explicit GPTLanguageModel(const GPTConfig& config);
    // idx (B,T) int64 token ids, T <= block_size; targets (B,T) or undefined.
    GPTOutput forward(const Tensor& idx, const Tensor& targets);
    Tensor forward(const Tensor& idx) override { return forward(idx, Tensor()).logits; }
    // gpt.py's generate: extends each row of idx (B,T) by max_new_tokens
    // tokens, each drawn from the softmax of the last position's logits, the
    // context cropped to block_size. Like gpt.py's it records each step's
    // graph; a NoGradGuard around the call skips that. nn::generate
    // (nn/generate.h) adds nanoGPT's temperature and top-k.
    Tensor generate(Tensor idx, int64_t max_new_tokens);

    const GPTConfig config;
    std::shared_ptr<Embedding> token_embedding_table;
    // Any module that maps the positions arange(T) (T,) to (T,C) fits here:
    // replace_module swaps in sinusoidal or no positions (docs/extending.md).
    std::shared_ptr<Module> position_embedding_table;
    std::shared_ptr<Sequential> blocks; // of Block
    std::shared_ptr<Module> ln_f;       // final LayerNorm
    std::shared_ptr<Linear> lm_head;
};

} // namespace ember::nn
