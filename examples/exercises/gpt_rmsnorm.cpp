// Exercise: add RMSNorm to a GPT (docs/exercises.md). RMSNorm (Llama's
// norm) divides each row of C channels by its root-mean-square and scales
// it by a learned weight: no mean subtracted, no bias.
//   y = x / sqrt(mean(x^2) + eps) * weight
// Written as a Module from existing ops, it needs no backward of its own;
// replace_module puts it in the place of every LayerNorm of a built GPT
// (each Block's ln1 and ln2, and ln_f), without copying Block or
// GPTLanguageModel (docs/extending.md). Its PyTorch twin is in
// tests/fixtures/torch_models.py; with the same seed both models start from
// the same weights and train through the same losses.
//
//   build/examples/exercises/gpt_rmsnorm
#include <cmath>

#include "exercise.h"

using namespace ember;

class RMSNorm : public nn::Module {
public:
    explicit RMSNorm(int64_t channels, double eps = 1e-6) : Module("RMSNorm"), eps(eps) {
        weight = register_parameter("weight", ones({channels})); // (C,)
    }
    // x (..., C) -> (..., C)
    Tensor forward(const Tensor& x) override {
        Tensor ms = mean(x * x, -1, /*keepdim=*/true); // (..., 1): the mean square of each row
        return x * pow(ms + eps, -0.5) * weight;       // divide by the rms, scale per channel
    }
    const double eps;
    Tensor weight;
};

int main() {
    const nn::GPTConfig config{.vocab_size = 65, .block_size = 8, .n_embd = 32, .n_head = 4, .n_layer = 2};
    manual_seed(1337);
    nn::GPTLanguageModel lecture(config); // with LayerNorms, for the parameter count

    manual_seed(1337);
    nn::GPTLanguageModel model(config);
    // RMSNorm in the place of every LayerNorm. The norms draw no random
    // numbers, so the other weights are those of `lecture`.
    for (size_t i = 0; i < model.blocks->size(); ++i) {
        auto block = model.blocks->at<nn::Block>(i);
        block->ln1 = block->replace_module("ln1", std::make_shared<RMSNorm>(config.n_embd));
        block->ln2 = block->replace_module("ln2", std::make_shared<RMSNorm>(config.n_embd));
    }
    model.ln_f = model.replace_module("ln_f", std::make_shared<RMSNorm>(config.n_embd));
    print_value("parameters with LayerNorm", double(lecture.num_parameters()));
    print_value("parameters with RMSNorm", double(model.num_parameters())); // 5 biases of 32 fewer

    // One batch, learned by heart over 5 AdamW steps.
    Tensor x = randint(0, 65, {4, 8}), y = randint(0, 65, {4, 8});
    optim::AdamW optimizer(model.parameters(), {.lr = 1e-2});
    Tensor losses = zeros({6});
    for (int64_t step = 0; step <= 5; ++step) {
        Tensor loss = model.forward(x, y).loss;
        losses[step].fill_(loss.item());
        if (step == 5) break;
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
    }
    print_value("ln 65", std::log(65.0)); // the first loss: gpt.py's small weights predict nearly uniformly
    print_values("losses", losses);
    print_values("ln_f.weight after 5 steps", model.ln_f->named_parameters().at(0).second);
    return 0;
}
