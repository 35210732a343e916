// The models of the "Let's build GPT" lecture, stage by stage, as
// train_gpt's presets build them. Each maps token ids (B,T) to logits
// (B,T,V) through forward(), so training, evaluation and sampling treat
// them alike. The PyTorch twins are in examples/train_gpt.py.
//
//   bigram     logits = a (V,V) lookup table: each token predicts the next alone
//   embed      token and position embeddings (C channels), then lm_head: still no
//              look at other tokens
//   head       + one self-attention head (hs = n_embd)
//   multihead  n_head heads of n_embd/n_head, concatenated (no projection yet)
//   ffwd       + a per-token MLP: Linear(C,C), ReLU
//   blocks     n_layer residual Blocks of attention (with projection) and a 4x MLP
//   layernorm  + pre-LayerNorm in each Block (nn::Block) and a final one
//   gpt        gpt.py's GPTLanguageModel (its _init_weights too): the default run
//              and the lecture preset (gpt.py at 10.8M parameters, dropout 0.2)
//
// The gpt stage runs in one of two models (--model): the lecture's classes
// (nn::GPTLanguageModel), or the fast model (nn::fast::GPT, the default)
// with the weights gpt.py's model draws, converted by nn::fast::from_lecture:
// the same function, computed faster. The other stages run the lecture's
// classes only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ember.h>

namespace train {

enum class Stage { Bigram, Embed, Head, MultiHead, FeedForward, Blocks, LayerNorm, GPT };

const char* stage_name(Stage stage);
Stage stage_from_name(const std::string& name); // throws std::invalid_argument

// Which model runs the gpt stage: the lecture's classes, the fast model with
// gpt.py's function and weights, or the fast model as nanoGPT's model.py
// builds it (GELU, LayerNorms and Linears without biases unless --bias yes,
// lm_head tied to the token embedding, dropout on the embeddings, and
// nanoGPT's own initialisation, c_proj scaled by 1/sqrt(2 n_layer)).
enum class ModelKind { Lecture, Fast, NanoGPT };
const char* kind_name(ModelKind kind);
ModelKind kind_from_name(const std::string& name); // throws std::invalid_argument

struct ModelConfig {
    Stage stage = Stage::GPT;
    int64_t vocab_size = 65;
    int64_t block_size = 8;
    int64_t n_embd = 32;
    int64_t n_head = 4;
    int64_t n_layer = 3;
    double dropout = 0.0;
    ModelKind kind = ModelKind::Fast; // for Stage::GPT
    // The nanoGPT model's options (nanoGPT's train.py defaults).
    bool bias = false;
    bool tie_weights = true;
};

// Whether the model attends (and so has heads to draw): not bigram and
// embed, and not a stack of zero blocks (--n-layer 0).
bool has_attention(const ModelConfig& config);

// Builds the model of config.stage, drawing its weights in the order the
// lecture's code does (the fast model: gpt.py's weights, converted).
std::shared_ptr<ember::nn::Module> make_model(const ModelConfig& config);

// One layer's attention seen from inside, as the model computed it for one
// sequence: each head's queries, keys and values (NH,T,hs) and weights
// (NH,T,T), row = query position, column = key position.
struct LayerInside {
    ember::Tensor q, k, v, weights;
};

// What the model computed for one sequence: every layer's attention, and the
// logits (T,V) at each position.
struct Inside {
    std::vector<LayerInside> layers;
    ember::Tensor logits;
};

// Runs the model (in eval mode, recording no graph) on one sequence ids
// (T,) and keeps what it computed. The lecture's models give their
// attention through forward hooks on each Head's key, query and value and
// its dropout (whose input is the softmax's output); the fast model by its
// inspect_attention. Heads with the same parent module (one
// MultiHeadAttention's list) are one layer. No layers for a model without
// attention.
Inside look_inside(ember::nn::Module& model, const ember::Tensor& ids);

// look_inside's weights, for pictures: maps[layer][head] is (T,T), row-major.
std::vector<std::vector<std::vector<float>>> attention_maps(ember::nn::Module& model, const ember::Tensor& ids);

} // namespace train
