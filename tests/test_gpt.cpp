// GPTLanguageModel (nn/gpt.h) against the lecture's gpt.py in PyTorch: the
// same parameters to the bit for the same seed (also at the lecture's 10.8M-
// parameter size), the same logits, loss and gradient of every parameter,
// the same losses over 10 AdamW steps, and the same sampled tokens; and a
// GPT whose layers a user replaced with their own (replace_module).
#include <catch2/catch.hpp>

#include <set>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::GPTConfig tiny(double dropout) {
    return nn::GPTConfig{
        .vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 2, .dropout = dropout};
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

// docs/extending.md's surgery, as the fixture "gpt_custom" does it in
// PyTorch: RMSNorm in the place of every LayerNorm, and Raschka's attention
// with biases on its q/k/v projections in the place of each list of heads.
void put_users_layers(nn::GPTLanguageModel& model) {
    const nn::GPTConfig& c = model.config;
    for (size_t i = 0; i < model.blocks->size(); ++i) {
        auto block = model.blocks->at<nn::Block>(i);
        block->ln1 = block->replace_module("ln1", std::make_shared<RMSNorm>(c.n_embd));
        block->ln2 = block->replace_module("ln2", std::make_shared<RMSNorm>(c.n_embd));
        block->sa =
            block->replace_module("sa", std::make_shared<nn::BatchedMultiHeadAttention>(c.n_embd, c.n_embd,
                                                                                        c.block_size, 0.1, c.n_head,
                                                                                        /*qkv_bias=*/true));
    }
    model.ln_f = model.replace_module("ln_f", std::make_shared<RMSNorm>(c.n_embd));
}

void check_gpt(const std::string& name, const nn::GPTConfig& config,
               const std::function<void(nn::GPTLanguageModel&)>& surgery = {}) {
    const Fixtures& f = fixtures("gpt");
    INFO("GPT case " << name);
    const int64_t seed = f.tensor(name + ".seed").item<int64_t>();
    manual_seed(static_cast<uint64_t>(seed));
    nn::GPTLanguageModel model(config);
    if (surgery) surgery(model);
    for (const auto& [pname, p] : model.named_parameters())
        require_equal(p.detach(), f.tensor(name + ".param." + pname), "initial " + pname);

    // One forward and backward with PyTorch's dropout masks (logits (B*T,V),
    // as gpt.py returns them with targets), then ten AdamW steps.
    check_gpt_training(
        model, [&](const Tensor& idx, const Tensor& targets) { return model.forward(idx, targets); }, f, name, 10);
}

} // namespace

TEST_CASE("a 2-layer GPTLanguageModel matches gpt.py in PyTorch", "[gpt]") {
    SECTION("with dropout") { check_gpt("gpt", tiny(0.1)); }
    SECTION("without") { check_gpt("gpt_plain", tiny(0.0)); }
}

TEST_CASE("a GPT whose layers a user replaced matches its PyTorch twin", "[gpt][extend]") {
    check_gpt("gpt_custom", tiny(0.1), put_users_layers);
    manual_seed(0);
    nn::GPTLanguageModel model(tiny(0.1));
    put_users_layers(model);
    // Arithmetic: embeddings 20*16 + 8*16; per block, Q, K, V with biases
    // 3*(16*16 + 16), out_proj 16*16 + 16, the MLP 16*64 + 64 + 64*16 + 16,
    // two RMSNorms 2*16; then ln_f 16 and lm_head 16*20 + 20.
    CHECK(model.num_parameters() == 320 + 128 + 2 * (816 + 272 + 2128 + 32) + 16 + 340);
    CHECK(model.blocks->at<nn::Block>(0)->ln1->type_name() == "RMSNorm");
    CHECK(model.blocks->at<nn::Block>(1)->sa->type_name() == "BatchedMultiHeadAttention");
    CHECK(model.ln_f->type_name() == "RMSNorm");
}

namespace {
// Positions as the original Transformer encodes them, with no parameters:
// pe[t, 2i] = sin(t / 10000^(2i/C)), pe[t, 2i+1] = cos(the same), with
// 10000^(-2i/C) written exp(-2i ln(10000) / C).
class SinusoidalPositions : public nn::Module {
public:
    explicit SinusoidalPositions(int64_t n_embd) : Module("SinusoidalPositions"), n_embd(n_embd) {}
    Tensor forward(const Tensor& positions) override {                                   // (T,) -> (T,C)
        Tensor t = positions.to(kFloat32).unsqueeze(1);                                  // (T,1)
        Tensor i = arange(0, n_embd, 2).to(kFloat32);                                    // (C/2,)
        Tensor angle = t * exp(i * (-std::log(10000.0) / static_cast<double>(n_embd)));  // (T,C/2)
        return stack({sin(angle), cos(angle)}, -1).reshape({positions.size(0), n_embd}); // (T,C)
    }
    const int64_t n_embd;
};
} // namespace

TEST_CASE("a GPT takes a user's position encoding", "[gpt][extend]") {
    const nn::GPTConfig c = tiny(0.0);
    manual_seed(0);
    nn::GPTLanguageModel model(c);
    const int64_t learned = model.num_parameters();
    manual_seed(1);
    Tensor idx = randint(0, c.vocab_size, {2, c.block_size});
    // Sinusoids in place of the learned table: its block_size x n_embd
    // parameters are gone, and the model runs on them.
    model.position_embedding_table =
        model.replace_module("position_embedding_table", std::make_shared<SinusoidalPositions>(c.n_embd));
    CHECK(model.num_parameters() == learned - c.block_size * c.n_embd);
    Tensor with_sines = model(idx);
    // The same model with its learned table holding those sinusoids gives the same logits.
    manual_seed(0);
    nn::GPTLanguageModel reference(c);
    {
        NoGradGuard no_grad;
        auto table = std::dynamic_pointer_cast<nn::Embedding>(reference.position_embedding_table);
        REQUIRE(table);
        table->weight.copy_(SinusoidalPositions(c.n_embd)(arange(c.block_size)));
    }
    require_equal(with_sines, reference(idx), "sinusoidal positions against a table holding them");
    // And pe[1, 0] = sin(1), pe[1, 1] = cos(1), from the formula.
    Tensor pe = SinusoidalPositions(c.n_embd)(arange(2));
    CHECK(pe[1][0].item<float>() == Approx(std::sin(1.0)));
    CHECK(pe[1][1].item<float>() == Approx(std::cos(1.0)));
}

TEST_CASE("replace_module refuses what it cannot do", "[gpt][extend][errors]") {
    nn::Block block(16, 2, 8, 0.0);
    CHECK_THROWS_WITH(block.replace_module("ln3", std::make_shared<RMSNorm>(16)),
                      Catch::Contains("[Block]") && Catch::Contains("ln3"));
    CHECK_THROWS_AS(block.replace_module("ln1", std::shared_ptr<RMSNorm>()), ValueError);
    // The old layer is gone from the module's lists the moment it is replaced.
    block.ln1 = block.replace_module("ln1", std::make_shared<RMSNorm>(16));
    for (const auto& [name, p] : block.named_parameters()) CHECK(name != "ln1.bias");
}

TEST_CASE("GPTLanguageModel runs the lecture's ops, never the fused attention", "[gpt]") {
    manual_seed(0);
    nn::GPTLanguageModel model(tiny(0.1)); // 2 layers of 2 heads
    Tensor loss = model.forward(randint(0, 20, {2, 8}), randint(0, 20, {2, 8})).loss;
    std::map<std::string, int> ops = graph_op_counts(loss);
    // Each of the 4 heads: masked_fill with its tril, then softmax.
    CHECK(ops["MaskedFillBackward0"] == 4);
    CHECK(ops["SoftmaxBackward0"] == 4);
    CHECK(ops.count("ScaledDotProductFlashAttentionForCpuBackward0") == 0);
    CHECK(ops.count("ScaledMaskedSoftmaxBackward") == 0);
}

TEST_CASE("the lecture's 10.8M-parameter GPT is built with PyTorch's parameters, bit for bit", "[gpt]") {
    const Fixtures& f = fixtures("gpt");
    manual_seed(1337);
    nn::GPTLanguageModel big(
        {.vocab_size = 65, .block_size = 256, .n_embd = 384, .n_head = 6, .n_layer = 6, .dropout = 0.2});
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
    nn::GPTLanguageModel model(tiny(0.0));
    model.eval();
    manual_seed(42);
    require_equal(model.generate(zeros({1, 1}, kInt64), 30), f.tensor("generate.gptpy"), "gpt.py's generate");
    manual_seed(42);
    require_equal(nn::generate(model, 8, zeros({1, 1}, kInt64), 30), f.tensor("generate.plain"), "nanoGPT's loop");
    require_equal(nn::generate(model, 8, zeros({2, 1}, kInt64), 20, 0.8, 5), f.tensor("generate.topk"),
                  "temperature 0.8, top-k 5");
}

TEST_CASE("top_p keeps the most likely tokens that first reach p (nucleus sampling)", "[gpt][generate]") {
    // probabilities 0.5, 0.3, 0.15, 0.05 in a shuffled order, over two rows
    Tensor probs = tensor({{0.15, 0.5, 0.05, 0.3}, {0.3, 0.05, 0.15, 0.5}});
    Tensor logits = log(probs).to(kFloat32);
    auto drawn = [&](double p) {
        Generator gen(7);
        std::vector<std::set<int64_t>> seen(2);
        for (int i = 0; i < 400; ++i) {
            Tensor ids = nn::sample_next(logits, 1.0, std::nullopt, &gen, p); // (2,1)
            for (int64_t b = 0; b < 2; ++b) seen[b].insert(ids[b][0].item<int64_t>());
        }
        return seen;
    };
    // 0.75: 0.5 (nothing before it), 0.3 (0.5 before it < 0.75); 0.15 has 0.8 before it: out
    CHECK(drawn(0.75) == std::vector<std::set<int64_t>>{{1, 3}, {3, 0}});
    CHECK(drawn(0.45) == std::vector<std::set<int64_t>>{{1}, {3}}); // the most likely alone reaches 0.45
    CHECK(drawn(1.0) == std::vector<std::set<int64_t>>{{0, 1, 2, 3}, {0, 1, 2, 3}});
    // top_k first: of the top 3 (0.5, 0.3, 0.15 renormalised to 0.53, 0.32, 0.16), 0.82 keeps two
    // (top_p first would keep three: 0.8 before the third is below 0.82)
    Generator gen(9);
    for (int i = 0; i < 200; ++i) {
        const int64_t id = nn::sample_next(logits.slice(0, 0, 1), 1.0, 3, &gen, 0.82)[0][0].item<int64_t>();
        REQUIRE((id == 1 || id == 3));
    }
    CHECK_THROWS_AS(nn::sample_next(logits, 1.0, std::nullopt, nullptr, 0.0), ValueError);
    CHECK_THROWS_AS(nn::sample_next(logits, 1.0, std::nullopt, nullptr, 1.5), ValueError);
}

TEST_CASE("GPT prints as PyTorch prints gpt.py's model", "[gpt][repr]") {
    CHECK(nn::GPTLanguageModel(tiny(0.1)).repr() == fixtures("gpt").text("repr.tiny"));
}

TEST_CASE("a freshly built GPT starts near loss ln(vocab_size)", "[gpt]") {
    manual_seed(0);
    nn::GPTLanguageModel model(tiny(0.0));
    Tensor idx = randint(0, 20, {8, 8});
    double loss = model.forward(idx, randint(0, 20, {8, 8})).loss.item();
    CHECK(loss == Approx(std::log(20.0)).margin(0.1));
}

TEST_CASE("GPTLanguageModel rejects inputs it cannot take", "[gpt][errors]") {
    manual_seed(0);
    nn::GPTLanguageModel model(tiny(0.0));
    CHECK_THROWS_WITH(model.forward(zeros({2, 9}, kInt64), Tensor()), Catch::Contains("[GPTLanguageModel]") &&
                                                                          Catch::Contains("T=9") &&
                                                                          Catch::Contains("block_size=8"));
    CHECK_THROWS_AS(model.forward(zeros({2, 4}), Tensor()), DTypeError);
    CHECK_THROWS_AS(model.forward(zeros({8}, kInt64), Tensor()), ShapeError);
    CHECK_THROWS_AS(model.forward(zeros({2, 4}, kInt64), zeros({2, 3}, kInt64)), ShapeError);
    CHECK_THROWS_AS(model.forward(full({1, 2}, 20, kInt64), Tensor()), IndexError);
    CHECK_THROWS_AS(model.generate(zeros({1, 0}, kInt64), 3), ShapeError);
    CHECK_THROWS_AS(model.generate(zeros({1, 1}, kInt64), -1), ValueError);
    CHECK_THROWS_AS(nn::generate(model, 8, zeros({1, 1}, kInt64), 3, 0.0), ValueError);
    CHECK_THROWS_AS(nn::generate(model, 8, zeros({1, 1}, kInt64), 3, 1.0, 0), ValueError);
    CHECK_THROWS_AS(nn::generate(model, 0, zeros({1, 1}, kInt64), 3), ValueError);
    CHECK_THROWS_AS(nn::sample_next(zeros({4}), 1.0), ShapeError);
    CHECK_THROWS_AS(nn::GPTLanguageModel({.vocab_size = 0}), ValueError);
    CHECK(nn::Block(10, 3, 8, 0.0).named_parameters().size() >
          0); // the lecture's heads: 3 of size 3, projected back to 10
    CHECK_THROWS_WITH(nn::Block(2, 3, 8, 0.0), Catch::Contains("[Block]") && Catch::Contains("n_head=3"));
    // generate crops long contexts to block_size instead of failing.
    CHECK(model.generate(zeros({1, 12}, kInt64), 2).shape() == Shape{1, 14});
    CHECK(nn::generate(model, 8, zeros({1, 12}, kInt64), 2).shape() == Shape{1, 14});
}
