// checkpoint (core/autograd/checkpoint.h) and the fast GPT's checkpoint_blocks:
// the gradients of the same computation without checkpointing, bit for bit,
// dropout included; the intermediates really are not kept; errors inside
// the recomputation reach the caller.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Both GPTs built after the same seed, trained one step after the same seed:
// the losses and every parameter's gradient, bit for bit.
void check_same_step(nn::fast::GPTConfig config) {
    manual_seed(3);
    Tensor idx = randint(0, config.vocab_size, {4, config.block_size});
    Tensor targets = randint(0, config.vocab_size, {4, config.block_size});
    std::vector<std::pair<Tensor, std::vector<Tensor>>> runs;
    for (bool recompute : {false, true}) {
        config.checkpoint_blocks = recompute;
        manual_seed(17);
        nn::fast::GPT model(config);
        manual_seed(23); // the dropout masks
        Tensor loss = model.forward(idx, targets).loss;
        loss.backward();
        std::vector<Tensor> grads;
        for (const auto& [name, p] : model.named_parameters()) grads.push_back(p.grad());
        // The next draw: the generator left where the plain run leaves it.
        grads.push_back(rand({1}));
        runs.emplace_back(loss, grads);
    }
    require_equal(runs[1].first, runs[0].first, "loss");
    for (size_t i = 0; i < runs[0].second.size(); ++i)
        require_equal(runs[1].second[i], runs[0].second[i], "gradient " + std::to_string(i));
}

} // namespace

TEST_CASE("a GPT with its Blocks checkpointed computes the plain GPT's gradients, bit for bit", "[checkpoint][gpt]") {
    nn::fast::GPTConfig config{
        .vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 3, .dropout = 0.2};
    SECTION("fused attention") {
        config.flash = true;
        check_same_step(config);
    }
    SECTION("the unfused attention, gpt.py's layout") {
        config = nn::fast::GPTConfig::lecture(
            {.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 3, .dropout = 0.2});
        config.flash = false;
        check_same_step(config);
    }
}

TEST_CASE("checkpoint recomputes instead of keeping the function's intermediates", "[checkpoint]") {
    Tensor w = randn({4, 4}).requires_grad_();
    Tensor x = randn({3, 4}).requires_grad_();
    int calls = 0;
    auto fn = [&](const Tensor& in) {
        ++calls;
        return tanh(matmul(in, w)).sum(1);
    };
    Tensor out = checkpoint(fn, x, {w});
    CHECK(calls == 1);
    CHECK(out.grad_fn()->name() == "CheckpointFunctionBackward");
    out.sum().backward();
    CHECK(calls == 2); // run again by the backward
    Tensor plain_x = x.detach().requires_grad_(), plain_w = w.detach().requires_grad_();
    tanh(matmul(plain_x, plain_w)).sum(1).sum().backward();
    require_equal(x.grad(), plain_x.grad(), "input's gradient");
    require_equal(w.grad(), plain_w.grad(), "parameter's gradient");
}

TEST_CASE("checkpoint gives parameters their gradient when the input needs none", "[checkpoint]") {
    Tensor w = randn({4, 2}).requires_grad_();
    Tensor x = randn({3, 4}); // data
    checkpoint([&](const Tensor& in) { return matmul(in, w); }, x, {w}).sum().backward();
    require_close(w.grad(), x.sum(0).unsqueeze(1).expand({4, 2}), {1e-6, 1e-6}, "d sum(x @ w) / dw");
    // With nothing needing a gradient it is a plain call.
    NoGradGuard no_grad;
    CHECK_FALSE(checkpoint([&](const Tensor& in) { return matmul(in, w); }, x, {w}).requires_grad());
}

TEST_CASE("an error in the recomputation reaches backward's caller", "[checkpoint][errors]") {
    Tensor x = randn({2, 3}).requires_grad_();
    int calls = 0;
    Tensor out = checkpoint(
        [&](const Tensor& in) {
            if (++calls == 2) return matmul(in, ones({4, 1})); // (2,3) @ (4,1): refused
            return in * 2;
        },
        x);
    CHECK_THROWS_AS(out.sum().backward(), ShapeError);
}
