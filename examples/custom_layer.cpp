// custom_layer: a new layer defined in user code, the way ember's own layers
// are, and proven right with gradcheck. docs/extending.md walks through it.
//
// The layer is RMSNorm (used by Llama in place of LayerNorm): it scales each
// row x of C channels by 1 / rms(x), rms(x) = sqrt(mean(x^2) + eps), and then
// by a learned weight per channel. It is built from ops that already have a
// backward, so it needs none of its own. Then it goes inside a GPT, in
// place of every LayerNorm of the lecture's GPT, through replace_module.
//
//   build/examples/custom_layer        (exits with 1 if a check fails)
#include <cmath>
#include <cstdio>
#include <iostream>

#include <ember.h>

#include "flags.h"

using namespace ember;

class RMSNorm : public nn::Module {
public:
    explicit RMSNorm(int64_t channels, double eps = 1e-6) : Module("RMSNorm"), eps(eps) {
        // A parameter, registered by name: it appears in named_parameters()
        // and state_dict() as "weight", and the optimisers see it.
        weight = register_parameter("weight", ones({channels}));
    }

    // x (..., C) -> (..., C)
    Tensor forward(const Tensor& x) override {
        Tensor ms = mean(x * x, -1, /*keepdim=*/true); // (..., 1)
        return x * pow(ms + eps, -0.5) * weight;       // broadcast over C
    }

    std::string extra_repr() const override {
        return "(" + std::to_string(weight.size(0)) + ",), eps=" + std::to_string(eps);
    }

    const double eps;
    Tensor weight;
};

const char* const kAbout = "A new layer (RMSNorm) defined in user code, proven right with\n"
                           "gradcheck (docs/extending.md).\n";

int main(int argc, char** argv) {
    const int stop = flags::threads_and_help(argc, argv, "custom_layer", kAbout, max_num_threads(), set_num_threads);
    if (stop >= 0) return stop; // after --help, or a bad command line
    manual_seed(0);
    RMSNorm norm(4);
    std::cout << norm << "\n";
    Tensor x = randn({2, 3, 4});
    Tensor y = norm(x);
    // Every row now has root-mean-square 1 (up to eps).
    Tensor rms = sqrt(mean(y * y, -1));
    std::cout << "rms of each output row:\n" << rms << "\n";
    bool ok = allclose(rms, ones({2, 3}), 1e-5, 1e-5);

    // The gradient check, in float64: with respect to the input, and to the
    // layer's own parameters (gradcheck nudges them in place and restores them).
    norm.to(kFloat64);
    {
        NoGradGuard no_grad;
        norm.weight.copy_(randn({4}, kFloat64)); // away from all-ones, to test the weight's role
    }
    Tensor x64 = randn({2, 3, 4}, kFloat64).requires_grad_();
    bool grads_ok = gradcheck([&](const std::vector<Tensor>& in) { return norm(in[0]); }, {x64}, norm.parameters());
    std::printf("rows normalised: %s\ngradcheck (input and weight): %s\n", ok ? "yes" : "NO",
                grads_ok ? "passed" : "FAILED");

    // The layer inside a GPT: replace_module puts it in the place of ln1
    // and ln2 of every block, and of ln_f. Nothing of Block or
    // GPTLanguageModel is copied.
    const nn::GPTConfig config{.vocab_size = 65, .block_size = 8, .n_embd = 32, .n_head = 4, .n_layer = 2};
    nn::GPTLanguageModel lecture(config);
    manual_seed(1337);
    nn::GPTLanguageModel model(config);
    for (size_t i = 0; i < model.blocks->size(); ++i) {
        auto block = model.blocks->at<nn::Block>(i);
        block->ln1 = block->replace_module("ln1", std::make_shared<RMSNorm>(config.n_embd));
        block->ln2 = block->replace_module("ln2", std::make_shared<RMSNorm>(config.n_embd));
    }
    model.ln_f = model.replace_module("ln_f", std::make_shared<RMSNorm>(config.n_embd));
    std::printf("\nthe RMSNorms of a GPT built with them:");
    for (const auto& [name, module] : model.named_modules())
        if (module->type_name() == "RMSNorm") std::printf(" %s", name.c_str());
    std::printf("\n");
    // RMSNorm has a weight and no bias: 2 * n_layer + 1 = 5 norms of 32 channels fewer.
    int64_t fewer = lecture.num_parameters() - model.num_parameters();
    std::printf("parameters: %lld (the LayerNorm GPT has %lld more)\n", static_cast<long long>(model.num_parameters()),
                static_cast<long long>(fewer));
    // gpt.py's small initial weights make every prediction nearly uniform.
    Tensor idx = randint(0, 65, {4, 8});
    double loss = model.forward(idx, randint(0, 65, {4, 8})).loss.item();
    std::printf("initial loss: %.4f (ln 65 = %.4f)\n", loss, std::log(65.0));
    bool gpt_ok = fewer == 5 * 32 && std::abs(loss - std::log(65.0)) < 0.05;
    return ok && grads_ok && gpt_ok ? 0 : 1;
}
