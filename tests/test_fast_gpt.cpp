// The fast model (nn/fast_gpt.h): against nanoGPT's model.py in PyTorch (its
// init drawn to the bit, logits, loss, gradients with dropout, AdamW steps),
// and against the lecture's GPTLanguageModel, whose weights from_lecture
// converts: the same logits with flash on and off, the same gradients, the
// same losses over 50 AdamW steps on tiny Shakespeare; its cache gives a
// full forward's logits and the same sampled text; its attention weights are
// the lecture's; errors.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

nn::GPTConfig tiny_lecture(int64_t n_head = 2, double dropout = 0.0) {
    return {.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = n_head, .n_layer = 2, .dropout = dropout};
}

// The fixtures' cases in nn::fast::GPTConfig terms (tests/fixtures/fx_fast_gpt.py).
nn::fast::GPTConfig fixture_config(const std::string& name, bool flash) {
    nn::fast::GPTConfig c{.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 2, .dropout = 0.1};
    if (name == "lecture") c = nn::fast::GPTConfig::lecture(tiny_lecture(2, 0.1));
    if (name == "nobias") {
        c.dropout = 0.0;
        c.bias = c.qkv_bias = c.tie_weights = false;
        c.activation = nn::fast::Activation::gelu;
    }
    c.flash = flash;
    return c;
}

std::string joined_keys(const nn::StateDict& dict) {
    std::string s;
    for (const auto& [key, t] : dict) s += (s.empty() ? "" : "\n") + key;
    return s;
}

// A lecture model after manual_seed(seed), and the fast model holding its weights.
struct Pair {
    std::shared_ptr<nn::GPTLanguageModel> lecture;
    std::shared_ptr<nn::fast::GPT> fast;
};

Pair converted(const nn::GPTConfig& config, uint64_t seed, bool flash) {
    manual_seed(seed);
    Pair p{std::make_shared<nn::GPTLanguageModel>(config), nullptr};
    nn::fast::GPTConfig fast_config = nn::fast::GPTConfig::lecture(config);
    fast_config.flash = flash;
    p.fast = std::make_shared<nn::fast::GPT>(fast_config);
    p.fast->load_state_dict(nn::fast::from_lecture(p.lecture->state_dict()));
    return p;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

} // namespace

TEST_CASE("the fast model matches nanoGPT's model.py in PyTorch", "[fast_gpt]") {
    const Fixtures& f = fixtures("fast_gpt");
    for (const std::string name : {"gpt2", "lecture", "nobias"})
        for (bool flash : {true, false}) {
            INFO("case " << name << (flash ? ", flash" : ", unfused"));
            const int64_t seed = f.tensor(name + ".seed").item<int64_t>();
            manual_seed(static_cast<uint64_t>(seed));
            nn::fast::GPT model(fixture_config(name, flash));
            // nanoGPT's init, drawn in its order (weight tying in GPT-2's layout).
            for (const auto& [pname, p] : model.named_parameters())
                require_equal(p.detach(), f.tensor(name + ".param." + pname), "initial " + pname);
            CHECK(joined_keys(model.state_dict()) == f.text(name + ".state_dict_keys"));

            check_gpt_training(
                model, [&](const Tensor& idx, const Tensor& targets) { return model.forward(idx, targets); }, f, name,
                5);
        }
    manual_seed(0);
    CHECK(nn::fast::GPT(fixture_config("gpt2", true)).repr() == f.text("gpt2.repr"));
}

TEST_CASE("the fast GPT runs the fused attention, or the fused softmax without flash", "[fast_gpt]") {
    for (bool flash : {true, false}) {
        manual_seed(0);
        nn::fast::GPT model(fixture_config("gpt2", flash)); // 2 layers
        Tensor loss = model.forward(randint(0, 20, {2, 8}), randint(0, 20, {2, 8})).loss;
        std::map<std::string, int> ops = graph_op_counts(loss);
        // One attention op per layer, over all heads: with the fast kernels
        // the fused op's node, without them its definition's masked_fill
        // (a reference build); unfused, the fused softmax.
        CHECK(ops["ScaledDotProductFlashAttentionForCpuBackward0"] + ops["MaskedFillBackward0"] == (flash ? 2 : 0));
        CHECK(ops["ScaledMaskedSoftmaxBackward"] == (flash ? 0 : 2));
    }
}

TEST_CASE("GPT-2's layout ties the token embedding to lm_head", "[fast_gpt]") {
    manual_seed(0);
    nn::fast::GPT model(fixture_config("gpt2", true));
    CHECK(model.wte->weight.impl() == model.lm_head->weight.impl());
    // Listed once, under its first name; state_dict has both names, as PyTorch's.
    int64_t listed = 0;
    for (const auto& [name, p] : model.named_parameters()) listed += p.impl() == model.wte->weight.impl();
    CHECK(listed == 1);
    CHECK(model.state_dict().contains("lm_head.weight"));
    // Arithmetic: wte 20*16, wpe 8*16; per block ln_1 and ln_2 2*2*16, c_attn
    // 16*48 + 48, c_proj 16*16 + 16, c_fc 16*64 + 64, c_proj 64*16 + 16; ln_f 2*16.
    CHECK(model.num_parameters() == 320 + 128 + 2 * (64 + 816 + 272 + 1088 + 1040) + 32);
}

TEST_CASE("the lecture's model and the fast model compute the same function", "[fast_gpt][lecture]") {
    // With dropout too: the fast model draws its masks in the order gpt.py's
    // Heads draw them (fast_gpt.cpp, Note [heads first]).
    for (int64_t n_head : {1, 2, 4})
        for (double dropout : {0.0, 0.2})
            for (bool flash : {true, false}) {
                INFO(n_head << " heads, dropout " << dropout << ", " << (flash ? "flash" : "unfused"));
                Pair p = converted(tiny_lecture(n_head, dropout), static_cast<uint64_t>(10 + n_head), flash);
                CHECK(p.fast->num_parameters() == p.lecture->num_parameters());
                Tensor idx = randint(0, 20, {3, 8}), targets = randint(0, 20, {3, 8});
                manual_seed(99);
                nn::GPTOutput a = p.lecture->forward(idx, targets);
                manual_seed(99);
                nn::GPTOutput b = p.fast->forward(idx, targets);
                require_close(b.logits.view({24, 20}), a.logits, {1e-5, 1e-6}, "logits");
                require_close(b.loss, a.loss, {1e-6, 1e-7}, "loss");
                // Gradients too: each mapped parameter's, through from_lecture's map.
                a.loss.backward();
                b.loss.backward();
                nn::StateDict lecture_grads;
                for (const auto& [name, param] : p.lecture->named_parameters())
                    lecture_grads.insert(name, param.grad());
                nn::StateDict mapped = nn::fast::from_lecture(lecture_grads);
                for (const auto& [name, param] : p.fast->named_parameters())
                    require_close(param.grad(), mapped.at(name), {1e-4, 1e-6}, "gradient of " + name);
            }
}

TEST_CASE("c_attn stacks the heads as the \"Multiple headers\" notebook does", "[fast_gpt][lecture]") {
    Pair p = converted(tiny_lecture(2), 3, true);
    // Rows h*hs .. (h+1)*hs of the queries' block are head h's query weight;
    // the keys' block starts at C, the values' at 2C.
    const int64_t C = 16, hs = 8;
    Tensor c_attn = p.fast->h->at<nn::fast::Block>(1)->attn->c_attn->weight;
    auto head = p.lecture->blocks->at<nn::Block>(1)->sa;
    auto heads = std::dynamic_pointer_cast<nn::MultiHeadAttention>(head)->heads;
    for (int64_t h = 0; h < 2; ++h) {
        require_equal(c_attn.narrow(0, h * hs, hs), heads->at<nn::Head>(h)->query->weight, "query rows");
        require_equal(c_attn.narrow(0, C + h * hs, hs), heads->at<nn::Head>(h)->key->weight, "key rows");
        require_equal(c_attn.narrow(0, 2 * C + h * hs, hs), heads->at<nn::Head>(h)->value->weight, "value rows");
    }
}

TEST_CASE("50 AdamW steps on tiny Shakespeare: the lecture's model and the fast model agree at every step",
          "[fast_gpt][lecture][training]") {
    // gpt.py's loop on its text, the two models fed the same batches.
    const std::string text = read_text(std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt");
    bool seen[256] = {};
    for (char c : text) seen[static_cast<unsigned char>(c)] = true;
    std::vector<int64_t> stoi(256, -1);
    int64_t vocab_size = 0;
    for (int c = 0; c < 256; ++c)
        if (seen[c]) stoi[static_cast<size_t>(c)] = vocab_size++;
    std::vector<int64_t> ids;
    for (char c : text) ids.push_back(stoi[static_cast<unsigned char>(c)]);
    Tensor data = from_vector(ids);
    REQUIRE(vocab_size == 65);

    // gpt.py's dropout 0.2 on: each step's forward draws the same masks in both.
    const nn::GPTConfig config{
        .vocab_size = 65, .block_size = 16, .n_embd = 32, .n_head = 4, .n_layer = 2, .dropout = 0.2};
    for (bool flash : {true, false}) {
        INFO((flash ? "flash" : "unfused"));
        Pair p = converted(config, 1337, flash);
        optim::AdamW opt_lecture(p.lecture->parameters(), {.lr = 1e-3});
        optim::AdamW opt_fast(p.fast->parameters(), {.lr = 1e-3});
        Generator batches(2024);
        double worst = 0;
        for (int step = 0; step < 50; ++step) {
            Tensor ix = randint(data.numel() - 16, {8}, {}, &batches);
            std::vector<Tensor> xs, ys;
            for (int64_t b = 0; b < 8; ++b) {
                const int64_t i = ix[b].item<int64_t>();
                xs.push_back(data.slice(0, i, i + 16));
                ys.push_back(data.slice(0, i + 1, i + 17));
            }
            Tensor xb = stack(xs), yb = stack(ys);
            manual_seed(static_cast<uint64_t>(1000 + step));
            Tensor loss_lecture = p.lecture->forward(xb, yb).loss;
            manual_seed(static_cast<uint64_t>(1000 + step));
            Tensor loss_fast = p.fast->forward(xb, yb).loss;
            // The two sum in different orders (one c_attn product against a
            // product per head; fused attention), so they part in the last
            // bits, and AdamW's division by sqrt(v) carries that along: the
            // stated tolerance is 1e-5 relative on each step's loss.
            const double a = loss_lecture.item(), b = loss_fast.item();
            worst = std::max(worst, std::abs(a - b) / std::abs(a));
            INFO("step " << step << ": lecture " << a << ", fast " << b);
            REQUIRE(std::abs(a - b) <= 1e-5 * std::abs(a));
            opt_lecture.zero_grad();
            opt_fast.zero_grad();
            loss_lecture.backward();
            loss_fast.backward();
            opt_lecture.step();
            opt_fast.step();
        }
        WARN("50 steps, " << (flash ? "flash" : "unfused") << ": largest relative difference of a loss " << worst);
    }
}

TEST_CASE("with a cache, the fast GPT gives a full forward's logits, position by position", "[fast_gpt][cache]") {
    for (bool flash : {true, false}) {
        INFO((flash ? "flash" : "unfused"));
        manual_seed(5);
        nn::fast::GPTConfig c = fixture_config("gpt2", flash);
        nn::fast::GPT model(c);
        model.eval();
        NoGradGuard no_grad;
        Tensor idx = randint(0, 20, {3, 8});
        Tensor full = model.forward(idx); // (3,8,20): every position at once
        nn::fast::KVCache cache = model.make_cache(3);
        // A prompt of 3 positions, then one at a time, then two at once.
        require_close(model.forward(idx.slice(1, 0, 3), cache), full.slice(1, 0, 3), {1e-5, 1e-5}, "prompt");
        for (int64_t t = 3; t < 6; ++t) {
            CHECK(cache.length == t);
            require_close(model.forward(idx.slice(1, t, t + 1), cache), full.slice(1, t, t + 1), {1e-5, 1e-5},
                          "position " + std::to_string(t));
        }
        require_close(model.forward(idx.slice(1, 6, 8), cache), full.slice(1, 6, 8), {1e-5, 1e-5}, "two more");
        CHECK_THROWS_WITH(model.forward(idx.slice(1, 0, 1), cache),
                          Catch::Contains("[fast::GPT]") && Catch::Contains("8 cached"));
        nn::fast::KVCache for_three = model.make_cache(3);
        CHECK_THROWS_AS(model.forward(idx.slice(0, 0, 2).slice(1, 0, 1), for_three), ShapeError); // 2 rows, not 3
    }
}

TEST_CASE("the fast GPT samples the same text with and without its cache, past block_size too",
          "[fast_gpt][generate][cache]") {
    for (bool flash : {true, false}) {
        manual_seed(6);
        nn::fast::GPT model(fixture_config("lecture", flash));
        model.eval();
        Tensor prompt = randint(0, 20, {2, 3});
        manual_seed(9);
        Tensor cached = model.generate(prompt, 25, 0.9, 10); // 28 tokens: 20 past block_size = 8
        manual_seed(9);
        Tensor plain = model.generate(prompt, 25, 0.9, 10, nullptr, /*use_cache=*/false);
        require_equal(cached, plain, flash ? "flash" : "unfused");
    }
    // And the lecture's model, converted, samples the same text (nanoGPT's loop).
    Pair p = converted(tiny_lecture(2), 8, true);
    p.lecture->eval();
    p.fast->eval();
    manual_seed(4);
    Tensor from_lecture = nn::generate(*p.lecture, 8, zeros({1, 1}, kInt64), 20);
    manual_seed(4);
    require_equal(p.fast->generate(zeros({1, 1}, kInt64), 20), from_lecture, "lecture and fast model");
}

TEST_CASE("the fast GPT's attention weights are the lecture's heads' weights", "[fast_gpt][lecture]") {
    Pair p = converted(tiny_lecture(2, 0.2), 12, true); // dropout 0.2: attention_weights runs without it
    p.lecture->eval();
    Tensor idx = randint(0, 20, {1, 7});
    std::vector<Tensor> weights = p.fast->attention_weights(idx);
    CHECK(p.fast->is_training()); // the caller's mode, restored
    REQUIRE(weights.size() == 2);
    // The lecture's: each Head's dropout receives its weights (B,T,T).
    std::vector<Tensor> hooked;
    std::vector<nn::RemovableHandle> handles;
    for (const auto& [name, module] : p.lecture->named_modules())
        if (auto* head = dynamic_cast<nn::Head*>(module))
            handles.push_back(head->dropout->register_forward_hook(
                [&](nn::Module&, const Tensor& input, const Tensor&) { hooked.push_back(input); }));
    p.lecture->forward(idx);
    REQUIRE(hooked.size() == 4);
    for (size_t layer = 0; layer < 2; ++layer) {
        REQUIRE(weights[layer].shape() == Shape{1, 2, 7, 7});
        for (int64_t h = 0; h < 2; ++h)
            require_close(weights[layer][0][h], hooked[layer * 2 + static_cast<size_t>(h)][0], {1e-5, 1e-6},
                          "layer " + std::to_string(layer) + ", head " + std::to_string(h));
    }
    for (auto& handle : handles) handle.remove();
}

TEST_CASE("the fast GPT's inspect_attention gives the lecture's heads' q, k and v", "[fast_gpt][lecture]") {
    Pair p = converted(tiny_lecture(2), 12, true);
    p.lecture->eval();
    Tensor idx = randint(0, 20, {1, 7});
    std::vector<nn::fast::AttentionInside> inside = p.fast->inspect_attention(idx);
    REQUIRE(inside.size() == 2);
    // The lecture's: each Head's query, key and value Linears give (B,T,hs), in that order of hooks.
    std::vector<Tensor> q, k, v;
    std::vector<nn::RemovableHandle> handles;
    for (const auto& [name, module] : p.lecture->named_modules())
        if (auto* head = dynamic_cast<nn::Head*>(module))
            for (auto [linear, list] :
                 {std::pair{head->query.get(), &q}, {head->key.get(), &k}, {head->value.get(), &v}})
                // (clang 14 cannot capture a structured binding: a copy of it.)
                handles.push_back(linear->register_forward_hook(
                    [into = list](nn::Module&, const Tensor&, const Tensor& out) { into->push_back(out); }));
    p.lecture->forward(idx);
    for (auto& handle : handles) handle.remove();
    REQUIRE(q.size() == 4);
    for (size_t layer = 0; layer < 2; ++layer) {
        const nn::fast::AttentionInside& in = inside[layer];
        REQUIRE(in.q.shape() == Shape{1, 2, 7, 8});
        REQUIRE(in.weights.shape() == Shape{1, 2, 7, 7});
        for (int64_t h = 0; h < 2; ++h) {
            const size_t i = layer * 2 + static_cast<size_t>(h);
            const std::string where = "layer " + std::to_string(layer) + ", head " + std::to_string(h);
            require_close(in.q[0][h], q[i][0], {1e-5, 1e-6}, "q of " + where);
            require_close(in.k[0][h], k[i][0], {1e-5, 1e-6}, "k of " + where);
            require_close(in.v[0][h], v[i][0], {1e-5, 1e-6}, "v of " + where);
        }
        // The weights are attention_weights', bit for bit: one computation.
        require_equal(in.weights, p.fast->attention_weights(idx)[layer], "weights of layer " + std::to_string(layer));
    }
}

TEST_CASE("the fast GPT and from_lecture refuse what they cannot take", "[fast_gpt][errors]") {
    CHECK_THROWS_WITH(nn::fast::GPT({.vocab_size = 20, .block_size = 8, .n_embd = 10, .n_head = 3, .n_layer = 1}),
                      Catch::Contains("[fast::GPT]") && Catch::Contains("n_embd=10") && Catch::Contains("n_head=3"));
    CHECK_THROWS_AS(nn::fast::GPT({.vocab_size = 0, .block_size = 8, .n_embd = 16, .n_head = 2}), ValueError);
    CHECK_THROWS_AS(nn::fast::GPT({.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .dropout = 1.5}),
                    ValueError);
    manual_seed(0);
    nn::fast::GPT model(fixture_config("gpt2", true));
    CHECK_THROWS_WITH(model.forward(zeros({2, 9}, kInt64), Tensor()),
                      Catch::Contains("[fast::GPT]") && Catch::Contains("T=9") && Catch::Contains("block_size=8"));
    CHECK_THROWS_AS(model.forward(zeros({2, 4}), Tensor()), DTypeError);
    CHECK_THROWS_AS(model.forward(zeros({2, 4}, kInt64), zeros({2, 5}, kInt64)), ShapeError);
    CHECK_THROWS_AS(model.make_cache(0), ValueError);
    nn::fast::KVCache wrong;
    CHECK_THROWS_AS(model.forward(zeros({1, 1}, kInt64), wrong), ValueError);
    CHECK_THROWS_AS(model.generate(zeros({1, 1}, kInt64), 3, 0.0), ValueError);
    CHECK_THROWS_AS(model.generate(zeros({1, 0}, kInt64), 3), ShapeError);
    CHECK_THROWS_AS(model.h->at<nn::fast::Block>(0)->attn->forward(zeros({1, 4, 15})), ShapeError);
    // A state_dict that is not a GPTLanguageModel's names the key it lacks.
    manual_seed(0);
    nn::GPTLanguageModel lecture(tiny_lecture());
    nn::StateDict partial;
    for (const auto& [key, t] : lecture.state_dict())
        if (key != "blocks.1.ffwd.net.2.bias") partial.insert(key, t);
    CHECK_THROWS_WITH(nn::fast::from_lecture(partial), Catch::Contains("blocks.1.ffwd.net.2.bias"));
}
