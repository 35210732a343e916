// Small layers, each a thin Module around one op: Embedding, LayerNorm,
// Dropout, ReLU, GELU. (The lecture's FeedForward is in nn/gpt.h.)
// Their math lives in core/ (embedding, layer_norm, dropout, relu, gelu).
// Tests: tests/test_layers.cpp.
#pragma once

#include "nn/linear.h"
#include "nn/module.h"

namespace ember::nn {

// A lookup table: row i of weight (num_embeddings, embedding_dim) for token
// i. weight ~ N(0, 1), PyTorch's init (randn of that shape).
// forward: idx (any shape, int64) -> (*idx.shape, embedding_dim).
class Embedding : public Module {
public:
    Embedding(int64_t num_embeddings, int64_t embedding_dim);
    Tensor forward(const Tensor& idx) override;
    std::string extra_repr() const override;
    const int64_t num_embeddings, embedding_dim;
    Tensor weight;
};

// Normalises over the trailing dims `normalized_shape` (docs/layer_norm.md),
// with a learned per-channel scale (weight = 1) and shift (bias = 0).
// bias = false keeps the scale alone (PyTorch 2.1's LayerNorm(..., bias=False),
// which nanoGPT's LayerNorm(ndim, bias) stands in for).
class LayerNorm : public Module {
public:
    explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
    explicit LayerNorm(int64_t size, double eps = 1e-5) : LayerNorm(Shape{size}, eps) {}
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    const Shape normalized_shape;
    const double eps;
    Tensor weight, bias; // undefined without elementwise_affine (bias: or without bias)
};

// Zeroes each element with probability p in training mode (scaling the rest
// by 1/(1-p)); the identity in eval mode. Same masks as PyTorch's (builds
// without MKL: docs/random.md). The masks are drawn from `generator`, or
// from the default generator when it is null (PyTorch's only choice): a
// generator of its own gives a model the same masks whatever else draws
// meanwhile, on this thread or another. set_dropout_generator gives one to
// every Dropout of a model.
class Dropout : public Module {
public:
    explicit Dropout(double p = 0.5, std::shared_ptr<Generator> generator = nullptr);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    const double p;
    std::shared_ptr<Generator> generator;
};

// Sets `generator` (null: the default one again) on every Dropout in
// `model`, itself included, and so on the attention dropout of the fast
// model's fused path too. Returns how many it set.
int set_dropout_generator(Module& model, std::shared_ptr<Generator> generator);

class ReLU : public Module {
public:
    ReLU() : Module("ReLU") {}
    Tensor forward(const Tensor& x) override { return relu(x); }
};

// approximate: "none" (the erf form) or "tanh".
class GELU : public Module {
public:
    explicit GELU(std::string approximate = "none");
    Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
    std::string extra_repr() const override { return "approximate='" + approximate + "'"; }
    const std::string approximate;
};

} // namespace ember::nn
