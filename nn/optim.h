// Optimisers: SGD (momentum, weight decay) and AdamW, with PyTorch's
// defaults and update rules; and clip_grad_norm_.
//
// An optimiser holds the parameters it updates (handles, so it sees the
// module's tensors) and its own state per parameter. step() updates every
// parameter that has a gradient, outside the autograd graph; zero_grad()
// forgets the gradients. state_dict()/load_state_dict() save the state, so
// a resumed run continues exactly. docs/optim.md; tests/test_optim.cpp.
#pragma once

#include <vector>

#include "nn/module.h"

namespace ember::optim {

class Optimizer {
public:
    explicit Optimizer(std::vector<Tensor> params);
    virtual ~Optimizer() = default;
    virtual void step() = 0;
    // Forgets the gradients (PyTorch's zero_grad(set_to_none=True), the
    // default from PyTorch 2.0 and what the lecture's gpt.py calls): a
    // parameter unused by the next loss then gets no update from step().
    void zero_grad();
    const std::vector<Tensor>& params() const { return params_; }
    // The per-parameter state, keyed "<i>.<name>" with i the parameter's index
    // in params() (AdamW: "0.step", "0.exp_avg", "0.exp_avg_sq", ...; SGD:
    // "0.momentum_buffer"), as PyTorch's state_dict()["state"][i][name]; and
    // its restoration.
    virtual nn::StateDict state_dict() const = 0;
    virtual void load_state_dict(const nn::StateDict& state) = 0;

protected:
    std::vector<Tensor> params_;
};

struct SGDOptions {
    double lr = 1e-3; // torch.optim.SGD requires lr; ember gives it PyTorch's usual 1e-3
    double momentum = 0.0;
    double dampening = 0.0;
    double weight_decay = 0.0;
    bool nesterov = false;
};

// g = grad + weight_decay * p; with momentum, buf = momentum * buf + (1 - dampening) * g
// (buf = g on the first step) and g = buf (or g + momentum * buf, Nesterov);
// p -= lr * g.
class SGD : public Optimizer {
public:
    SGD(std::vector<Tensor> params, SGDOptions options);
    void step() override;
    nn::StateDict state_dict() const override;
    void load_state_dict(const nn::StateDict& state) override;
    SGDOptions options;

private:
    std::vector<Tensor> momentum_buffer_; // undefined until the first step with momentum
};

struct AdamWOptions {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 1e-2;
};

// Adam with decoupled weight decay (Loshchilov & Hutter), PyTorch's update:
//   p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g          v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// As in PyTorch, each parameter counts its own steps t, and its state is
// created at its first step with a gradient (in the parameter's dtype then).
//
// Parameter groups: PyTorch's AdamW([{'params': decay, 'weight_decay': 0.1},
// {'params': no_decay, 'weight_decay': 0.0}], ...), as nanoGPT's
// configure_optimizers decays the 2-d tensors (weights, embeddings) and
// leaves biases and norms alone. Each group has a weight decay of its own;
// the options' other fields (lr, betas, eps) apply to all. The state's
// indices count the parameters group after group, as PyTorch's.
struct AdamWParamGroup {
    std::vector<Tensor> params;
    double weight_decay;
};

class AdamW : public Optimizer {
public:
    AdamW(std::vector<Tensor> params, AdamWOptions options = {});
    AdamW(const std::vector<AdamWParamGroup>& groups, AdamWOptions options = {});
    void step() override;
    nn::StateDict state_dict() const override;
    void load_state_dict(const nn::StateDict& state) override;
    AdamWOptions options;

private:
    struct State {
        int64_t step = 0;           // t: this parameter's updates so far
        Tensor exp_avg, exp_avg_sq; // m and v; undefined before the first update
    };
    std::vector<State> state_;
    std::vector<double> weight_decay_; // per parameter; NaN: options.weight_decay
};

// Scales all gradients together so that their global norm (the norm of the
// vector of every gradient element) is at most max_norm, as
// torch.nn.utils.clip_grad_norm_. norm_type 2 or infinity. Returns the norm
// before clipping.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

} // namespace ember::optim
