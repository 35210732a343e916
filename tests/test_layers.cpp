// Layers (nn/linear.h, nn/layers.h, nn/init.h): PyTorch's initial
// parameters to the bit for the same seed, outputs and gradients of input
// and parameters, gradient checks, reprs, and errors.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("Linear draws PyTorch's weights and computes PyTorch's outputs and gradients", "[layers][linear]") {
    const Fixtures& f = fixtures("layers");
    check_module_case(f, "linear", [] { return std::make_shared<nn::Linear>(5, 3); });
    check_module_case(f, "linear.no_bias", [] { return std::make_shared<nn::Linear>(4, 6, false); });
    check_module_case(f, "linear.wide", [] { return std::make_shared<nn::Linear>(32, 64); });
}

TEST_CASE("Linear(2,3) after manual_seed(42) is torch's, to the bit", "[layers][linear]") {
    // torch 1.13: torch.manual_seed(42); torch.nn.Linear(2, 3) (docs/random.md).
    manual_seed(42);
    nn::Linear l(2, 3);
    require_equal(l.weight.detach(), tensor({{0.5406103730201721f, 0.5869042277336121f},
                                             {-0.16565565764904022f, 0.6495562791824341f},
                                             {-0.15492962300777435f, 0.14268755912780762f}}));
    require_equal(l.bias.detach(), tensor({-0.34425848722457886f, 0.4152715504169464f, 0.6233449578285217f}));
}

TEST_CASE("Embedding, LayerNorm, Dropout and FeedForward match PyTorch", "[layers]") {
    const Fixtures& f = fixtures("layers");
    check_module_case(f, "embedding", [] { return std::make_shared<nn::Embedding>(10, 4); });
    check_module_case(f, "embedding.small", [] { return std::make_shared<nn::Embedding>(3, 4); });
    check_module_case(f, "layer_norm", [] { return std::make_shared<nn::LayerNorm>(6); });
    check_module_case(f, "dropout", [] { return std::make_shared<nn::Dropout>(0.2); });
    check_module_case(f, "dropout.eval", [] { return std::make_shared<nn::Dropout>(0.2); });
    check_module_case(f, "feed_forward", [] { return std::make_shared<nn::FeedForward>(8, 0.1); });
}

TEST_CASE("layers pass the finite-difference gradient check in float64, parameters too", "[layers][gradcheck]") {
    manual_seed(0);
    nn::Linear linear(4, 3);
    nn::LayerNorm norm(3);
    nn::FeedForward ffwd(3, 0.0);
    nn::Embedding emb(5, 3);
    for (nn::Module* m : std::vector<nn::Module*>{&linear, &norm, &ffwd, &emb}) m->to(kFloat64);
    {
        NoGradGuard no_grad; // LayerNorm starts at w = 1, b = 0: move it somewhere general
        norm.weight.copy_(randn({3}, kFloat64));
        norm.bias.copy_(randn({3}, kFloat64));
    }
    Tensor x = randn({2, 4}, kFloat64).requires_grad_();
    auto layer = [](nn::Module& m) { return [&m](const std::vector<Tensor>& in) { return m(in[0]); }; };
    CHECK(gradcheck(layer(linear), {x}, linear.parameters()));
    Tensor h = randn({2, 3}, kFloat64).requires_grad_();
    CHECK(gradcheck(layer(norm), {h}, norm.parameters()));
    CHECK(gradcheck(layer(ffwd), {h}, ffwd.parameters()));
    CHECK(gradcheck(layer(emb), {tensor({{1, 4}, {4, 0}})}, emb.parameters()));
}

TEST_CASE("layers print as PyTorch prints them", "[layers][repr]") {
    const Fixtures& f = fixtures("layers");
    CHECK(nn::FeedForward(8, 0.1).repr() == f.text("repr.feed_forward"));
    CHECK(nn::LayerNorm(32).repr() == f.text("repr.layer_norm"));
    CHECK(nn::Embedding(65, 32).repr() == f.text("repr.embedding"));
    CHECK(nn::GELU("tanh").repr() == f.text("repr.gelu"));
}

TEST_CASE("Dropout drops only in training mode", "[layers]") {
    nn::Dropout d(0.5);
    Tensor x = ones({1000});
    manual_seed(1);
    Tensor y = d(x);
    int64_t kept = sum(y != 0).item<int64_t>();
    CHECK(kept > 400);
    CHECK(kept < 600);
    d.eval();
    CHECK(d(x).is_same(x));
}

TEST_CASE("layers reject inputs that do not fit", "[layers][errors]") {
    nn::Linear l(4, 3);
    CHECK_THROWS_AS(l(ones({2, 5})), ShapeError);
    CHECK_THROWS_WITH(l(ones({2, 5})),
                      Catch::Contains("[Linear]") && Catch::Contains("(2,5)") && Catch::Contains("(3,4)"));
    CHECK_THROWS_AS(l(ones({})), ShapeError);
    nn::Embedding e(5, 2);
    CHECK_THROWS_AS(e(tensor({5})), IndexError);
    CHECK_THROWS_AS(e(ones({2})), DTypeError);
    CHECK_THROWS_AS(nn::LayerNorm(4)(ones({2, 3})), ShapeError);
    CHECK_THROWS_AS(nn::Dropout(1.5), ValueError);
    CHECK_THROWS_AS(nn::GELU("fast"), ValueError);
    CHECK_THROWS_AS(nn::Linear(-1, 3), ValueError);
}
