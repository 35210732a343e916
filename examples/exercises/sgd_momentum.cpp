// Exercise: add momentum to SGD (docs/exercises.md). Plain SGD steps
// against the gradient: p -= lr * g. With momentum, a velocity remembers
// the past steps, as PyTorch's torch.optim.SGD(momentum=0.9) keeps it:
//   buf = g                  on the first step
//   buf = momentum * buf + g after it
//   p  -= lr * buf
// Along a direction the gradient keeps, the steps grow towards
// lr * g / (1 - momentum), 10 times plain SGD's for 0.9.
// Here the optimiser is written from scratch, as your own Optimizer, and
// fitted to a small least-squares problem.
//
//   build/examples/exercises/sgd_momentum
#include <string>

#include "exercise.h"

using namespace ember;

class MomentumSGD : public optim::Optimizer {
public:
    MomentumSGD(std::vector<Tensor> params, double lr, double momentum)
        : Optimizer(std::move(params)), lr(lr), momentum(momentum), buf_(params_.size()) {}

    void step() override {
        NoGradGuard no_grad; // an update is not part of any graph
        for (size_t i = 0; i < params_.size(); ++i) {
            Tensor p = params_[i];
            if (!p.grad().defined()) continue; // unused by the loss (zero_grad forgets gradients)
            Tensor g = p.grad();
            if (!buf_[i].defined()) buf_[i] = g.clone(); // the first step: the velocity is the gradient
            else buf_[i].mul_(momentum).add_(g);         // buf = momentum * buf + g, in place
            p.sub_(buf_[i] * lr);                        // p -= lr * buf
        }
    }

    // The velocities are the state: a resumed run needs them ("<i>.momentum_buffer", as PyTorch).
    nn::StateDict state_dict() const override {
        nn::StateDict state;
        for (size_t i = 0; i < buf_.size(); ++i)
            if (buf_[i].defined()) state.insert(std::to_string(i) + ".momentum_buffer", buf_[i].clone());
        return state;
    }
    void load_state_dict(const nn::StateDict& state) override {
        for (size_t i = 0; i < buf_.size(); ++i) {
            std::string name = std::to_string(i) + ".momentum_buffer";
            buf_[i] = state.contains(name) ? state.at(name).clone() : Tensor();
        }
    }

    const double lr, momentum;

private:
    std::vector<Tensor> buf_; // one velocity per parameter, undefined before its first step
};

// Fits Linear(3, 2) to 5 random points for 5 steps.
struct Fit {
    Tensor losses, weight, bias; // the loss before each step; the parameters after the last
};
template <typename MakeOptimizer>
static Fit fit(MakeOptimizer make) {
    manual_seed(3); // the same layer and points every time (and in PyTorch: tests/fixtures/fx_exercises.py)
    nn::Linear lin(3, 2);
    Tensor x = randn({5, 3}), y = randn({5, 2});
    auto optimizer = make(lin.parameters());
    Tensor losses = zeros({5});
    for (int64_t step = 0; step < 5; ++step) {
        Tensor loss = mean(pow(lin(x) - y, 2)); // (5,2) -> ()
        losses[step].fill_(loss.item());
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
    }
    return {losses, lin.weight.detach(), lin.bias.detach()};
}

int main() {
    Fit plain = fit([](std::vector<Tensor> ps) { return optim::SGD(ps, {.lr = 0.1}); });
    print_values("losses, plain SGD", plain.losses);
    Fit mine = fit([](std::vector<Tensor> ps) { return MomentumSGD(ps, 0.1, 0.9); });
    print_values("losses, MomentumSGD", mine.losses);
    print_values("weight after 5 steps", mine.weight);
    print_values("bias after 5 steps", mine.bias);
    // ember's own SGD has momentum too: the same numbers.
    Fit builtin = fit([](std::vector<Tensor> ps) { return optim::SGD(ps, {.lr = 0.1, .momentum = 0.9}); });
    print_value("largest difference from optim::SGD(momentum = 0.9)", max(abs(builtin.weight - mine.weight)).item());
    return 0;
}
