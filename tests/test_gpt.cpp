// Block and GPT (nn/gpt.h) against the lecture's gpt.py in PyTorch: the same
// parameters to the bit for the same seed (also at the lecture's 10.8M-
// parameter size), the same logits, loss and gradient of every parameter,
// the same losses over 10 AdamW steps, and the same sampled tokens; and a
// GPT built with a user's own norm, attention and MLP (nn::BlockLayers).
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::GPTConfig tiny(double dropout, bool batched, bool flash = true) {
    return nn::GPTConfig{.vocab_size = 20,
                         .block_size = 8,
                         .n_embd = 16,
                         .n_head = 2,
                         .n_layer = 2,
                         .dropout = dropout,
                         .batched_attention = batched,
                         .flash = flash};
}

// The digest tests/fixtures/fx_gpt.py computes: sum of bits * (i * 2654435761 + 1) mod 2^64.
int64_t digest(const Tensor& t) {
    Tensor c = t.detach().contiguous();
    const auto* bits = reinterpret_cast<const uint32_t*>(c.data_ptr<float>());
    uint64_t total = 0;
    for (int64_t i = 0; i < c.numel(); ++i) total += uint64_t{bits[i]} * (static_cast<uint64_t>(i) * 2654435761ull + 1);
    return static_cast<int64_t>(total);
}

std::string join_names(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : "\n") + n;
    return s;
}

// A user's norm, as examples/custom_layer.cpp writes it; its PyTorch twin is
// RMSNorm in tests/fixtures/torch_models.py.
class RMSNorm : public nn::Module {
public:
    explicit RMSNorm(int64_t channels, double eps = 1e-6) : Module("RMSNorm"), eps(eps) {
        weight = register_parameter("weight", ones({channels}));
    }
    Tensor forward(const Tensor& x) override { return x * pow(mean(x * x, -1, true) + eps, -0.5) * weight; }
    const double eps;
    Tensor weight;
};

// The fixture "gpt_custom"'s layers: RMSNorm, and batched attention with
// biases on its Q, K and V projections.
nn::BlockLayers custom_layers() {
    return {.make_norm = [](int64_t n_embd) { return std::make_shared<RMSNorm>(n_embd); },
            .make_attention =
                [](nn::AttentionConfig config) {
                    config.qkv_bias = true;
                    return std::make_shared<nn::BatchedMultiHeadAttention>(config);
                }};
}

void check_gpt(const std::string& name, const nn::GPTConfig& config) {
    const Fixtures& f = fixtures("gpt");
    INFO("GPT case " << name);
    const int64_t seed = f.tensor(name + ".seed").item<int64_t>();
    manual_seed(static_cast<uint64_t>(seed));
    nn::GPT model(config);
    for (const auto& [pname, p] : model.named_parameters())
        require_equal(p.detach(), f.tensor(name + ".param." + pname), "initial " + pname);

    // One forward and backward, with PyTorch's dropout masks.
    manual_seed(static_cast<uint64_t>(seed + 1000));
    model.train();
    nn::GPTOutput out = model.forward(f.tensor(name + ".idx"), f.tensor(name + ".targets"));
    require_close(out.logits, f.tensor(name + ".logits"), {1e-5, 1e-5}, "logits");
    require_close(out.loss, f.tensor(name + ".loss"), {1e-6, 1e-6}, "loss");
    out.loss.backward();
    for (const auto& [pname, p] : model.named_parameters())
        require_close(p.grad(), f.tensor(name + ".grad." + pname), {1e-4, 1e-6}, "gradient of " + pname);

    // Ten AdamW steps on the fixture's batches.
    model.zero_grad();
    optim::AdamW opt(model.parameters(), {.lr = 1e-2});
    manual_seed(static_cast<uint64_t>(seed + 2000));
    std::vector<double> losses;
    for (int step = 0; step < 10; ++step) {
        Tensor xb = f.tensor(name + ".batch" + std::to_string(step));
        Tensor yb = cat({xb.slice(1, 1), xb.slice(1, 0, 1)}, 1); // torch.roll(xb, -1, 1)
        Tensor loss = model.forward(xb, yb).loss;
        losses.push_back(loss.item());
        opt.zero_grad();
        loss.backward();
        opt.step();
    }
    require_close(from_vector(losses, {}, kFloat64), f.tensor(name + ".adamw_losses"), {1e-5, 1e-6}, "AdamW losses");
}

} // namespace

TEST_CASE("a 2-layer GPT (list of heads, dropout) matches gpt.py in PyTorch", "[gpt]") {
    SECTION("fused attention (the default)") { check_gpt("gpt", tiny(0.1, false)); }
    SECTION("the notebooks' attention ops") { check_gpt("gpt", tiny(0.1, false, /*flash=*/false)); }
}

TEST_CASE("a 2-layer GPT with batched attention matches its PyTorch twin", "[gpt]") {
    SECTION("fused attention (the default)") { check_gpt("gpt_batched", tiny(0.0, true)); }
    SECTION("the notebooks' attention ops") { check_gpt("gpt_batched", tiny(0.0, true, /*flash=*/false)); }
}

TEST_CASE("a GPT built with a user's norm and attention matches its PyTorch twin", "[gpt][extend]") {
    nn::GPTConfig config = tiny(0.1, false);
    config.layers = custom_layers();
    check_gpt("gpt_custom", config);
    manual_seed(0);
    nn::GPT model(config);
    // Arithmetic: embeddings 20*16 + 8*16; per block, Q, K, V with biases
    // 3*(16*16 + 16), out_proj 16*16 + 16, the MLP 16*64 + 64 + 64*16 + 16,
    // two RMSNorms 2*16; then ln_f 16 and lm_head 16*20 + 20.
    CHECK(model.num_parameters() == 320 + 128 + 2 * (816 + 272 + 2128 + 32) + 16 + 340);
    CHECK(model.blocks->at<nn::Block>(0)->ln1->type_name() == "RMSNorm");
    CHECK(model.ln_f->type_name() == "RMSNorm");
    // Its own attention keeps no cache: generate runs without one, the same tokens.
    model.eval();
    manual_seed(4);
    Tensor cached = model.generate(zeros({1, 1}, kInt64), 12);
    manual_seed(4);
    require_equal(cached, model.generate(zeros({1, 1}, kInt64), 12, 1.0, {}, nullptr, /*use_cache=*/false));
}

TEST_CASE("a user's MLP goes in through make_feed_forward, and gpt_init reaches it", "[gpt][extend]") {
    // A two-layer MLP without the lecture's Sequential: parameters fc.weight, ...
    struct MLP : nn::Module {
        MLP(int64_t n_embd) : Module("MLP") {
            fc = register_module("fc", std::make_shared<nn::Linear>(n_embd, 2 * n_embd));
            proj = register_module("proj", std::make_shared<nn::Linear>(2 * n_embd, n_embd));
        }
        Tensor forward(const Tensor& x) override { return proj->forward(gelu(fc->forward(x))); }
        std::shared_ptr<nn::Linear> fc, proj;
    };
    nn::GPTConfig config = tiny(0.0, true);
    config.layers.make_feed_forward = [](int64_t n_embd, double) { return std::make_shared<MLP>(n_embd); };
    manual_seed(0);
    nn::GPT model(config);
    Tensor w = model.blocks->at<nn::Block>(1)->ffwd->named_parameters()[0].second;
    CHECK(w.shape() == Shape{32, 16});
    // gpt.py's init draws N(0, 0.02); PyTorch's default, U(-1/4, 1/4) for 16
    // inputs, would have a standard deviation of 0.144.
    CHECK(std::sqrt(var(w).item()) == Approx(0.02).margin(0.003));
    Tensor loss = model.forward(randint(0, 20, {2, 8}), randint(0, 20, {2, 8})).loss;
    loss.backward();
    CHECK(w.grad().defined());
}

TEST_CASE("a Block names the factory or layer that broke it", "[gpt][extend][errors]") {
    nn::BlockLayers no_norm{.make_norm = [](int64_t) { return std::shared_ptr<nn::Module>(); }};
    CHECK_THROWS_WITH(nn::Block(16, 2, 8, 0.0, false, false, no_norm),
                      Catch::Contains("[Block]") && Catch::Contains("make_norm") && Catch::Contains("ln1"));
    nn::GPTConfig config = tiny(0.0, false);
    config.layers = no_norm;
    CHECK_THROWS_AS(nn::GPT(config), ValueError);
    // An attention that sums its channels away, (B,T,C) -> (B,T,1), would
    // broadcast into the residual sum without the block's check.
    struct Squash : nn::Module {
        Squash() : Module("Squash") {}
        Tensor forward(const Tensor& x) override { return x.sum(-1, true); }
    };
    nn::Block block(16, 2, 8, 0.0, false, false,
                    {.make_attention = [](const nn::AttentionConfig&) { return std::make_shared<Squash>(); }});
    CHECK_THROWS_WITH(block.forward(zeros({2, 4, 16})), Catch::Contains("[Block]") && Catch::Contains("sa (Squash)") &&
                                                            Catch::Contains("(2,4,1)") && Catch::Contains("(2,4,16)"));
    CHECK_THROWS_AS(block.forward(zeros({2, 4, 16})), ShapeError);
}

TEST_CASE("the lecture's 10.8M-parameter GPT is built with PyTorch's parameters, bit for bit", "[gpt]") {
    const Fixtures& f = fixtures("gpt");
    manual_seed(1337);
    nn::GPT big({.vocab_size = 65, .block_size = 256, .n_embd = 384, .n_head = 6, .n_layer = 6, .dropout = 0.2});
    CHECK(big.num_parameters() == f.tensor("lecture.num_parameters").item<int64_t>());
    std::vector<std::string> names, keys;
    for (const auto& [pname, p] : big.named_parameters()) {
        names.push_back(pname);
        INFO("parameter " << pname);
        CHECK(digest(p) == f.tensor("lecture.digest." + pname).item<int64_t>());
    }
    for (const auto& [key, t] : big.state_dict()) keys.push_back(key);
    CHECK(join_names(names) == f.text("lecture.names"));
    CHECK(join_names(keys) == f.text("lecture.state_dict_keys"));
}

TEST_CASE("generate samples PyTorch's tokens for the same seed", "[gpt][generate]") {
    const Fixtures& f = fixtures("gpt");
    manual_seed(11);
    nn::GPT model(tiny(0.0, false));
    model.eval();
    manual_seed(42);
    require_equal(model.generate(zeros({1, 1}, kInt64), 30), f.tensor("generate.plain"), "plain sampling");
    require_equal(model.generate(zeros({2, 1}, kInt64), 20, 0.8, 5), f.tensor("generate.topk"),
                  "temperature 0.8, top-k 5");
}

TEST_CASE("with key/value caches, a GPT gives the logits of a full forward, position by position",
          "[gpt][generate][cache]") {
    // Every attention form a GPT can hold: a list of Heads or batched heads,
    // each through the fused op or the notebooks' ops.
    for (bool batched : {false, true})
        for (bool flash : {true, false}) {
            INFO((batched ? "batched heads" : "list of heads") << (flash ? ", fused" : ", unfused"));
            manual_seed(5);
            nn::GPT model(tiny(0.0, batched, flash));
            model.eval();
            NoGradGuard no_grad;
            Tensor idx = randint(0, 20, {3, 8});
            Tensor full = model.forward(idx); // (3,8,20): every position at once
            model.setup_caches(3);
            // A prompt of 3 positions, then one position at a time.
            require_close(model.forward(idx.slice(1, 0, 3)), full.slice(1, 0, 3), {1e-5, 1e-5}, "prompt");
            for (int64_t t = 3; t < 8; ++t) {
                CHECK(model.cached_positions() == t);
                require_close(model.forward(idx.slice(1, t, t + 1)), full.slice(1, t, t + 1), {1e-5, 1e-5},
                              "position " + std::to_string(t));
            }
            CHECK_THROWS_WITH(model.forward(idx.slice(1, 0, 1)), Catch::Contains("[GPT]") && Catch::Contains("cached"));
            model.remove_caches();
            CHECK(model.cached_positions() == -1);
            require_close(model.forward(idx), full, {0, 0}, "without caches again");
        }
}

TEST_CASE("generate draws the same tokens with and without the cache, past block_size too", "[gpt][generate][cache]") {
    for (bool batched : {false, true}) {
        manual_seed(6);
        nn::GPT model(tiny(0.0, batched));
        model.eval();
        Tensor prompt = randint(0, 20, {2, 3});
        manual_seed(9);
        Tensor cached = model.generate(prompt, 25, 0.9, 10); // 28 tokens: 20 past block_size = 8
        manual_seed(9);
        Tensor plain = model.generate(prompt, 25, 0.9, 10, nullptr, /*use_cache=*/false);
        require_equal(cached, plain, batched ? "batched heads" : "list of heads");
        CHECK(model.cached_positions() == -1); // generate removed its caches
    }
}

TEST_CASE("attention caches refuse what does not fit", "[gpt][cache][errors]") {
    nn::Head head(8, 4, 5, 0.0);
    head.setup_cache(2);
    NoGradGuard no_grad;
    head.forward(randn({2, 4, 8}));
    CHECK_THROWS_WITH(head.forward(randn({2, 2, 8})),
                      Catch::Contains("[Head]") && Catch::Contains("2 new positions after the 4 cached"));
    head.setup_cache(2);
    CHECK_THROWS_WITH(head.forward(randn({3, 1, 8})), Catch::Contains("[Head]") && Catch::Contains("batch size"));
    CHECK_THROWS_AS(head.setup_cache(0), ValueError);
    nn::BatchedMultiHeadAttention batched({.d_in = 8, .d_out = 8, .context_length = 4, .num_heads = 2});
    batched.setup_cache(1);
    CHECK_THROWS_AS(batched.forward(randn({1, 5, 8})), ShapeError);
}

TEST_CASE("GPT prints as PyTorch prints gpt.py's model", "[gpt][repr]") {
    CHECK(nn::GPT(tiny(0.1, false)).repr() == fixtures("gpt").text("repr.tiny"));
}

TEST_CASE("a freshly built GPT starts near loss ln(vocab_size)", "[gpt]") {
    manual_seed(0);
    nn::GPT model(tiny(0.0, false));
    Tensor idx = randint(0, 20, {8, 8});
    double loss = model.forward(idx, randint(0, 20, {8, 8})).loss.item();
    CHECK(loss == Approx(std::log(20.0)).margin(0.1));
}

TEST_CASE("GPT rejects inputs it cannot take", "[gpt][errors]") {
    manual_seed(0);
    nn::GPT model(tiny(0.0, false));
    CHECK_THROWS_WITH(model.forward(zeros({2, 9}, kInt64), Tensor()),
                      Catch::Contains("[GPT]") && Catch::Contains("T=9") && Catch::Contains("block_size=8"));
    CHECK_THROWS_AS(model.forward(zeros({2, 4}), Tensor()), DTypeError);
    CHECK_THROWS_AS(model.forward(zeros({8}, kInt64), Tensor()), ShapeError);
    CHECK_THROWS_AS(model.forward(zeros({2, 4}, kInt64), zeros({2, 3}, kInt64)), ShapeError);
    CHECK_THROWS_AS(model.forward(full({1, 2}, 20, kInt64), Tensor()), IndexError);
    CHECK_THROWS_AS(model.generate(zeros({1, 1}, kInt64), 3, 0.0), ValueError);
    CHECK_THROWS_AS(model.generate(zeros({1, 1}, kInt64), 3, 1.0, 0), ValueError);
    CHECK_THROWS_AS(model.generate(zeros({1, 0}, kInt64), 3), ShapeError);
    CHECK_THROWS_AS(nn::Block(10, 3, 8, 0.0, /*batched=*/true), ValueError);
    CHECK(nn::Block(10, 3, 8, 0.0).named_parameters().size() >
          0); // the lecture's heads: 3 of size 3, projected back to 10
    CHECK_THROWS_AS(nn::Block(2, 3, 8, 0.0), ValueError);
    // generate crops long contexts to block_size instead of failing.
    CHECK(model.generate(zeros({1, 12}, kInt64), 2).shape() == Shape{1, 14});
}
