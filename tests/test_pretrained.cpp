// GPT-2 checkpoints (nn/pretrained.h): directories written by the PyTorch
// side (tests/fixtures/fx_pretrained.py) in Hugging Face's layout and in
// nanoGPT's load into the fast model and compute PyTorch's logits and loss;
// ten AdamW steps from the GPT-2 checkpoint follow PyTorch's; what ember
// writes reads back the same and has the layout's names and shapes, GPT-2
// 124M's included; every malformed directory is refused with a typed error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include "check.h"
#include "fixtures.h"

using namespace ember;
using namespace ember::testing;
namespace fs = std::filesystem;
using nn::fast::CheckpointError;
using nn::fast::Layout;

namespace {

const std::string kDir = EMBER_FIXTURE_DIR;
const std::string kHF = kDir + "/pretrained_hf", kNanoGPT = kDir + "/pretrained_nanogpt";

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The scratch directories made so far (GPT-2 124M's is 475 MB), removed
// when the program ends.
struct ScratchDirs {
    std::vector<std::string> dirs;
    ~ScratchDirs() {
        for (const std::string& dir : dirs) fs::remove_all(dir);
    }
};

// A fresh, empty scratch directory in the system's temporary folder.
std::string scratch(const std::string& name) {
    static ScratchDirs made;
    const std::string dir =
        (fs::temp_directory_path() / ("ember_test_pretrained_" + name + "_" + std::to_string(getpid()))).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    made.dirs.push_back(dir);
    return dir;
}

// A scratch copy of a fixture directory, to spoil.
std::string copy_of(const std::string& from, const std::string& name) {
    const std::string dir = scratch(name);
    for (const char* file : {"config.json", "model.safetensors"})
        fs::copy_file(from + "/" + file, dir + "/" + file, fs::copy_options::overwrite_existing);
    return dir;
}

// `text` with its first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

// torch.logsumexp(x, -1): log(sum(exp(x))) over the last dimension, shifted by its max.
Tensor logsumexp_last(const Tensor& x) {
    Tensor m = max(x, -1, /*keepdim=*/true).values;
    return log(sum(exp(x - m), -1)) + m.squeeze(-1);
}

// The GPT-2 fixture's logits and loss against PyTorch's.
void check_gpt2_outputs(nn::fast::GPT& model, const Fixtures& f) {
    model.eval();
    nn::GPTOutput out = model.forward(f.tensor("gpt2.idx"), f.tensor("gpt2.targets"));
    REQUIRE(out.logits.shape() == Shape{2, 16, 50257});
    require_close(out.logits.index_select(2, f.tensor("gpt2.cols")), f.tensor("gpt2.logits_cols"), {1e-5, 1e-5},
                  "logits at 64 columns");
    require_close(logsumexp_last(out.logits), f.tensor("gpt2.logsumexp"), {1e-5, 1e-5}, "logsumexp of all logits");
    require_close(out.loss, f.tensor("gpt2.loss"), {1e-6, 1e-6}, "loss");
}

} // namespace

TEST_CASE("GPT-2 in Hugging Face's layout computes PyTorch's logits and loss", "[pretrained]") {
    Fixtures f("pretrained");
    Layout layout = Layout::nanogpt;
    auto model = nn::fast::from_pretrained(kHF, 0.0, &layout);
    CHECK(layout == Layout::huggingface);
    const auto& c = model->config;
    CHECK(c.vocab_size == 50257);
    CHECK(c.block_size == 32);
    CHECK(c.n_embd == 8);
    CHECK(c.n_head == 2);
    CHECK(c.n_layer == 2);
    CHECK(c.activation == nn::fast::Activation::gelu_tanh);
    CHECK(c.bias);
    CHECK(c.qkv_bias);
    CHECK_FALSE(c.lm_head_bias);
    CHECK(c.tie_weights);
    CHECK(c.dropout == 0.0); // the file's 0.1 is not ember's business when sampling
    CHECK(model->lm_head->weight.is_same(model->wte->weight));
    check_gpt2_outputs(*model, f);
}

TEST_CASE("GPT2LMHeadModel's names (\"transformer.\", lm_head.weight) load too", "[pretrained]") {
    Fixtures f("pretrained");
    const std::string dir = copy_of(kHF, "prefixed");
    nn::StateDict file = nn::load_safetensors(kHF + "/model.safetensors"), prefixed;
    for (const auto& [name, t] : file) prefixed.insert("transformer." + name, t);
    prefixed.insert("lm_head.weight", file.at("wte.weight"));
    nn::save_safetensors(prefixed, dir + "/model.safetensors");
    check_gpt2_outputs(*nn::fast::from_pretrained(dir), f);
}

TEST_CASE("the mask buffers are ignored whatever their dtype (older files hold them as uint8)", "[pretrained]") {
    Fixtures f("pretrained");
    const std::string dir = copy_of(kHF, "int_buffers");
    nn::StateDict file = nn::load_safetensors(kHF + "/model.safetensors"), changed;
    for (const auto& [name, t] : file)
        changed.insert(name, name.find(".attn.bias") != std::string::npos ? t.to(kInt64) : t);
    nn::save_safetensors(changed, dir + "/model.safetensors");
    check_gpt2_outputs(*nn::fast::from_pretrained(dir), f);
}

TEST_CASE("ten AdamW steps from the GPT-2 checkpoint follow PyTorch's", "[pretrained]") {
    Fixtures f("pretrained");
    auto model = nn::fast::from_pretrained(kHF);
    model->train();
    optim::AdamW opt(model->parameters(), {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = 0.1});
    std::vector<double> losses;
    for (int step = 0; step < 10; ++step) {
        Tensor xb = f.tensor("gpt2.batch" + std::to_string(step));
        Tensor yb = cat({xb.slice(1, 1), xb.slice(1, 0, 1)}, 1); // torch.roll(xb, -1, 1)
        Tensor loss = model->forward(xb, yb).loss;
        losses.push_back(loss.item());
        opt.zero_grad();
        loss.backward();
        opt.step();
    }
    // The losses agree to 1e-6 in float32; Adam's division by sqrt(v)
    // amplifies rounding in the smallest gradients, so the weights after
    // ten steps are held to 1e-5.
    require_close(from_vector(losses, {}, kFloat64), f.tensor("gpt2.adamw_losses"), {1e-6, 1e-6}, "AdamW losses");

    // Written back in Hugging Face's layout, they are PyTorch's weights.
    const std::string dir = scratch("trained");
    nn::fast::save_pretrained(*model, dir);
    nn::StateDict written = nn::load_safetensors(dir + "/model.safetensors");
    for (const char* name : {"h.1.mlp.c_fc.weight", "ln_f.bias", "wpe.weight"})
        require_close(written.at(name), f.tensor(std::string("gpt2.trained.") + name), {1e-5, 1e-5}, name);
}

TEST_CASE("nanoGPT's checkpoint (converted from ckpt.pt) computes PyTorch's logits and loss", "[pretrained]") {
    Fixtures f("pretrained");
    Layout layout = Layout::huggingface;
    auto model = nn::fast::from_pretrained(kNanoGPT, 0.0, &layout);
    CHECK(layout == Layout::nanogpt);
    const auto& c = model->config;
    CHECK(c.vocab_size == 65);
    CHECK(c.n_embd == 32);
    CHECK(c.n_head == 4);
    CHECK_FALSE(c.bias);
    CHECK_FALSE(c.qkv_bias);
    CHECK(c.activation == nn::fast::Activation::gelu);
    model->eval();
    nn::GPTOutput out = model->forward(f.tensor("nanogpt.idx"), f.tensor("nanogpt.targets"));
    require_close(out.logits, f.tensor("nanogpt.logits"), {1e-5, 1e-5}, "logits");
    require_close(out.loss, f.tensor("nanogpt.loss"), {1e-6, 1e-6}, "loss");
}

TEST_CASE("save_pretrained writes each layout back as it was read", "[pretrained]") {
    SECTION("Hugging Face's: the same tensors but the ignored buffers, and the same configuration") {
        auto model = nn::fast::from_pretrained(kHF);
        const std::string dir = scratch("hf_round_trip");
        nn::fast::save_pretrained(*model, dir, Layout::huggingface);
        nn::Metadata meta;
        nn::StateDict written = nn::load_safetensors(dir + "/model.safetensors", &meta);
        CHECK(meta == nn::Metadata{{"format", "pt"}}); // Hugging Face's loader requires it
        nn::StateDict original = nn::load_safetensors(kHF + "/model.safetensors");
        size_t compared = 0;
        for (const auto& [name, t] : original) {
            if (name.find(".attn.bias") != std::string::npos || name.find(".attn.masked_bias") != std::string::npos)
                continue;
            REQUIRE(written.contains(name));
            require_equal(written.at(name), t, name);
            ++compared;
        }
        CHECK(written.size() == compared); // and nothing else: no lm_head.weight, it is wte.weight
        CHECK(compared == 2 + 2 * 12 + 2);
        Layout layout;
        nn::fast::GPTConfig back = nn::fast::read_config(dir, &layout);
        CHECK(layout == Layout::huggingface);
        CHECK(back.vocab_size == 50257);
        CHECK(back.block_size == 32);
        CHECK(back.activation == nn::fast::Activation::gelu_tanh);
        CHECK(back.tie_weights);
    }
    SECTION("nanoGPT's: the same names and values") {
        auto model = nn::fast::from_pretrained(kNanoGPT);
        const std::string dir = scratch("nanogpt_round_trip");
        nn::fast::save_pretrained(*model, dir, Layout::nanogpt);
        nn::StateDict written = nn::load_safetensors(dir + "/model.safetensors");
        nn::StateDict original = nn::load_safetensors(kNanoGPT + "/model.safetensors");
        REQUIRE(written.size() == original.size());
        for (const auto& [name, t] : original) {
            REQUIRE(written.contains(name));
            require_equal(written.at(name), t, name);
        }
        Layout layout;
        nn::fast::GPTConfig back = nn::fast::read_config(dir, &layout);
        CHECK(layout == Layout::nanogpt);
        CHECK_FALSE(back.bias);
        CHECK(back.block_size == 32);
        CHECK(read_text(dir + "/config.json").find("\"bias\": false") != std::string::npos);
    }
    SECTION("a layout that cannot hold the model is refused before any file is written") {
        nn::fast::GPT lecture(
            nn::fast::GPTConfig::lecture({.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 1}));
        const std::string dir = scratch("refused");
        CHECK_THROWS_AS(nn::fast::save_pretrained(lecture, dir, Layout::huggingface), ValueError); // no qkv bias
        CHECK_THROWS_AS(nn::fast::save_pretrained(lecture, dir, Layout::nanogpt), ValueError);     // ReLU, untied
        auto gpt2 = nn::fast::from_pretrained(kHF);
        CHECK_THROWS_AS(nn::fast::save_pretrained(*gpt2, dir, Layout::nanogpt), ValueError); // tanh GELU
        CHECK(fs::is_empty(dir));
        write_text(dir + "/file", "x");
        CHECK_THROWS_AS(nn::fast::save_pretrained(*gpt2, dir + "/file"), CheckpointError); // not a directory
    }
}

TEST_CASE("GPT-2 124M: built and saved by ember, in GPT-2's names and shapes", "[pretrained][124M]") {
    // Built without drawing 124 M random numbers (they are not the point
    // here): every tensor filled with its own index, one with distinct values.
    std::unique_ptr<nn::fast::GPT> built;
    {
        nn::init::NoInitGuard no_init;
        built = std::make_unique<nn::fast::GPT>(nn::fast::GPTConfig{}); // GPT-2's smallest: the defaults
    }
    nn::fast::GPT& model = *built;
    {
        NoGradGuard no_grad;
        int i = 0;
        for (auto& [name, p] : model.named_parameters()) p.fill_(0.001 * ++i);
        Tensor w = model.transformer->state_dict().at("h.11.mlp.c_proj.weight"); // (768, 3072)
        w.copy_(arange(w.numel()).to(kFloat32).view(w.shape()));
    }
    CHECK(model.num_parameters() == 124'439'808);
    const std::string dir = scratch("gpt2_124m");
    nn::fast::save_pretrained(model, dir);
    nn::StateDict written = nn::load_safetensors(dir + "/model.safetensors");
    // GPT-2's own file holds these 148 tensors (and 12 attn.bias buffers).
    CHECK(written.size() == 148);
    const std::vector<std::pair<std::string, Shape>> shapes = {
        {"wte.weight", {50257, 768}},     {"wpe.weight", {1024, 768}},
        {"h.0.ln_1.weight", {768}},       {"h.0.attn.c_attn.weight", {768, 2304}},
        {"h.0.attn.c_attn.bias", {2304}}, {"h.0.attn.c_proj.weight", {768, 768}},
        {"h.5.ln_2.bias", {768}},         {"h.11.mlp.c_fc.weight", {768, 3072}},
        {"h.11.mlp.c_fc.bias", {3072}},   {"h.11.mlp.c_proj.weight", {3072, 768}},
        {"h.11.mlp.c_proj.bias", {768}},  {"ln_f.weight", {768}},
    };
    for (const auto& [name, shape] : shapes) {
        INFO(name);
        REQUIRE(written.contains(name));
        CHECK(written.at(name).shape() == shape);
    }
    const Tensor c_proj = model.transformer->state_dict().at("h.11.mlp.c_proj.weight");
    require_equal(written.at("h.11.mlp.c_proj.weight"), c_proj.t(), "the Conv1D weight, (in, out)");
    CHECK(read_text(dir + "/config.json").find("\"n_positions\": 1024") != std::string::npos);
    auto back = nn::fast::from_pretrained(dir);
    CHECK(back->num_parameters() == 124'439'808);
    require_equal(back->transformer->state_dict().at("h.11.mlp.c_proj.weight"), c_proj, "after the round trip");
}

TEST_CASE("malformed checkpoint directories are refused with a typed error", "[pretrained]") {
    const std::string config = read_text(kHF + "/config.json");
    auto with_config = [&](const std::string& name, const std::string& text) {
        const std::string dir = copy_of(kHF, name);
        write_text(dir + "/config.json", text);
        return dir;
    };
    SECTION("the files") {
        CHECK_THROWS_AS(nn::fast::from_pretrained(scratch("empty")), CheckpointError);
        const std::string dir = copy_of(kHF, "config_dir");
        fs::remove(dir + "/config.json");
        fs::create_directory(dir + "/config.json");
        CHECK_THROWS_WITH(nn::fast::from_pretrained(dir), Catch::Contains("is a directory"));
        const std::string no_model = copy_of(kHF, "no_model");
        fs::remove(no_model + "/model.safetensors");
        CHECK_THROWS_AS(nn::fast::from_pretrained(no_model), nn::SafetensorsError);
        CHECK_THROWS_AS(nn::fast::from_pretrained(with_config("not_json", "{\"model_type\": ")), CheckpointError);
        CHECK_THROWS_AS(nn::fast::from_pretrained(with_config("array", "[1, 2]")), CheckpointError);
        CHECK_THROWS_WITH(nn::fast::from_pretrained(with_config("neither", "{\"n_layer\": 2}")),
                          Catch::Contains("neither Hugging Face's"));
    }
    SECTION("configurations the fast model cannot compute") {
        const std::vector<std::pair<std::string, std::string>> bad = {
            {"\"model_type\": \"gpt2\"", "\"model_type\": \"llama\""},
            {"\"activation_function\": \"gelu_new\"", "\"activation_function\": \"swish\""},
            {"\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": 1e-06"},
            {"\"n_inner\": null", "\"n_inner\": 100"},
            {"\"scale_attn_by_inverse_layer_idx\": false", "\"scale_attn_by_inverse_layer_idx\": true"},
            {"\"scale_attn_weights\": true", "\"scale_attn_weights\": false"},
            {"\"n_head\": 2", "\"n_head\": 3"},
            {"\"n_embd\": 8", "\"n_embd\": -8"},
            {"\"vocab_size\": 50257", "\"vocab_size\": \"50257\""},
            {"\"n_positions\": 32", "\"n_positions\": 32.5"},
        };
        for (const auto& [from, to] : bad) {
            INFO(to);
            const std::string key = to.substr(1, to.find('"', 1) - 1);
            CHECK_THROWS_AS(nn::fast::from_pretrained(with_config("config", replaced(config, from, to))),
                            CheckpointError);
            CHECK_THROWS_WITH(nn::fast::from_pretrained(with_config("config", replaced(config, from, to))),
                              Catch::Contains("\"" + key + "\""));
        }
        const std::string nanogpt = read_text(kNanoGPT + "/config.json");
        const std::string dir = copy_of(kNanoGPT, "nanogpt_no_bias");
        write_text(dir + "/config.json", replaced(nanogpt, "\"bias\": false,", ""));
        CHECK_THROWS_WITH(nn::fast::from_pretrained(dir), Catch::Contains("\"bias\" is missing"));
    }
    SECTION("tensors that do not fit the configuration") {
        const nn::StateDict file = nn::load_safetensors(kHF + "/model.safetensors");
        auto with_tensors = [&](const std::string& name, const nn::StateDict& tensors) {
            const std::string dir = copy_of(kHF, name);
            nn::save_safetensors(tensors, dir + "/model.safetensors");
            return dir;
        };
        auto edited = [&](const std::string& key, const Tensor& replacement) {
            nn::StateDict out;
            for (const auto& [name, t] : file)
                if (name != key) out.insert(name, t);
            if (replacement.defined()) out.insert(key, replacement);
            return out;
        };
        const Tensor c_attn = file.at("h.1.attn.c_attn.weight"); // (8, 24): Conv1D, (in, out)
        CHECK_THROWS_WITH(nn::fast::from_pretrained(with_tensors("missing", edited("h.1.attn.c_attn.weight", {}))),
                          Catch::Contains("\"h.1.attn.c_attn.weight\" is missing"));
        CHECK_THROWS_WITH(nn::fast::from_pretrained(
                              with_tensors("linear", edited("h.1.attn.c_attn.weight", c_attn.t().contiguous()))),
                          Catch::Contains("stored (in, out)"));
        CHECK_THROWS_AS(nn::fast::from_pretrained(with_tensors("int", edited("ln_f.bias", zeros({8}, kInt64)))),
                        CheckpointError);
        nn::StateDict extra = edited("lm_head.bias", zeros({50257}));
        CHECK_THROWS_WITH(nn::fast::from_pretrained(with_tensors("extra", extra)),
                          Catch::Contains("unexpected tensor \"lm_head.bias\""));
        nn::StateDict untied = edited("lm_head.weight", zeros({50257, 8}));
        CHECK_THROWS_WITH(nn::fast::from_pretrained(with_tensors("untied", untied)),
                          Catch::Contains("lm_head.weight differs from wte.weight"));
    }
    SECTION("layout names") {
        CHECK(nn::fast::layout_from_name("nanogpt") == Layout::nanogpt);
        CHECK(std::string(nn::fast::layout_name(Layout::huggingface)) == "huggingface");
        CHECK_THROWS_AS(nn::fast::layout_from_name("gguf"), ValueError);
    }
}

TEST_CASE("NoInitGuard: modules built under it draw nothing, and it nests", "[pretrained]") {
    manual_seed(3);
    Tensor expected = randn({4});
    manual_seed(3);
    {
        nn::init::NoInitGuard outer;
        {
            nn::init::NoInitGuard inner;
            nn::Linear linear(4, 4);
            nn::Embedding embedding(5, 4);
        }
        CHECK(nn::init::NoInitGuard::active());
    }
    CHECK_FALSE(nn::init::NoInitGuard::active());
    require_equal(randn({4}), expected, "the generator after building under the guard");
    manual_seed(3);
    nn::Linear drawn(4, 4); // outside it, the init draws again
    CHECK_FALSE(allclose(randn({4}), expected));
}

TEST_CASE("text_loss: the mean cross-entropy over chunks of n_positions + 1 that overlap by one", "[pretrained]") {
    Fixtures f("pretrained");
    auto model = nn::fast::from_pretrained(kHF);
    Tensor ids_t = f.tensor("gpt2.eval_ids"); // 75 ids: chunks [0,33), [32,65), [64,75)
    std::vector<int64_t> ids(ids_t.data_ptr<int64_t>(), ids_t.data_ptr<int64_t>() + ids_t.numel());
    std::vector<int64_t> seen;
    model->train();
    nn::fast::TextLoss loss = nn::fast::text_loss(*model, ids, [&](int64_t done, int64_t total) {
        CHECK(total == 74);
        seen.push_back(done);
    });
    CHECK(model->is_training()); // left as it was
    CHECK(loss.tokens == 74);
    CHECK(loss.chunks == 3);
    CHECK(seen == std::vector<int64_t>{32, 64, 74});
    CHECK(loss.mean == Approx(f.tensor("gpt2.eval_loss").item()).epsilon(1e-6));
    CHECK_THROWS_AS(nn::fast::text_loss(*model, {50256}), ValueError);
    CHECK_THROWS_AS(nn::fast::text_loss(*model, {1, 50257}), IndexError);
}
