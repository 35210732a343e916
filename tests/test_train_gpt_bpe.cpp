// train_gpt --tokenizer: trained on tiny Shakespeare's BPE tokens (a
// tokenizer of 512 tokens whose merges a second implementation learned,
// tests/fixtures/make_bpe_fixture.py), its first losses match its PyTorch
// twin's on the ids that twin encoded itself (tests/fixtures/fx_train.py);
// the checkpoint keeps every token's bytes, so --sample-only decodes without
// the tokenizer's file; a resumed run needs the same tokenizer; the
// attention map labels each token; bad tokenizers exit with status 2.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "check.h"
#include "process.h"
#include "train_gpt_run.h"

using namespace ember;
using namespace ember::testing;
namespace fs = std::filesystem;

namespace {

const std::string kShakespeare = std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt";

// A minbpe .model file (RegexTokenizer, GPT-2's pattern) of the first
// `count` merges of tests/fixtures/bpe_shakespeare_regex.txt.
void write_model(const std::string& path, int count) {
    std::ifstream in(std::string(EMBER_FIXTURE_DIR) + "/bpe_shakespeare_regex.txt");
    REQUIRE(in);
    std::ofstream out(path);
    out << "minbpe v1\n" << tokenizer::kGPT2Pattern << "\n0\n";
    std::string line;
    int written = 0;
    while (std::getline(in, line) && written < count) {
        std::istringstream fields(line);
        int a = 0, b = 0, id = 0;
        long long n = 0;
        if (fields >> a >> b >> id >> n) {
            out << a << " " << b << "\n";
            ++written;
        }
    }
    REQUIRE(written == count);
}

void expect(const CommandResult& r, const std::string& message) {
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find(message) != std::string::npos);
}

} // namespace

TEST_CASE("train_gpt --tokenizer trains on BPE tokens as its PyTorch twin does", "[train_gpt][bpe]") {
    const Fixtures& f = fixtures("train");
    const std::string dir = scratch_dir("bpe"), model = dir + "/shakespeare512.model";
    write_model(model, 256);
    const std::string args = "--data " + kShakespeare + " --tokenizer " + model + " --max-iters 10 --eval-iters 2";
    CommandResult r = run(args + " --sample-tokens 30 --out " + dir + "/run");
    INFO(r.out);
    REQUIRE(r.status == 0);
    // The twin's own encoding has as many tokens; 90% of them train.
    const int64_t tokens = f.tensor("bpe.tokens").item<int64_t>();
    CHECK(tokens == 575345);
    CHECK(r.out.find("1115394 characters, 575345 tokens of --tokenizer " + model + ", vocabulary of 512") !=
          std::string::npos);
    CHECK(r.out.find("expected starting loss ln(512) = 6.2383") != std::string::npos);
    require_close(from_vector(csv_column(dir + "/run/losses.csv", 1), {}, kFloat64), f.tensor("bpe.step_losses"),
                  {0, 1e-4}, "training losses");
    std::vector<double> val = csv_column(dir + "/run/losses.csv", 3);
    const std::string last = r.out.substr(r.out.rfind("final: "));
    const double final_val = std::stod(last.substr(last.find("val_loss=") + 9));
    val.push_back(final_val);
    require_close(from_vector(val, {}, kFloat64), f.tensor("bpe.eval_val"), {0, 2e-4}, "val losses");
    CHECK(r.out.find("sample (30 tokens, temperature 1)") != std::string::npos);

    // Per character: the val loss times the val split's tokens (the last
    // 10%: 575345 - int(0.9 * 575345)) over its characters.
    const size_t at = r.out.find("val loss per character: ");
    REQUIRE(at != std::string::npos);
    double loss_per_char = 0, loss_per_token = 0;
    long long val_tokens = 0, val_chars = 0;
    REQUIRE(std::sscanf(r.out.c_str() + at,
                        "val loss per character: %lf (%lf per token x %lld tokens / %lld characters", &loss_per_char,
                        &loss_per_token, &val_tokens, &val_chars) == 4);
    CHECK(loss_per_token == Approx(final_val).margin(1e-4));
    CHECK(val_tokens == 575345 - 517810);
    // The val text is a tenth of the play, give or take a token's characters.
    CHECK(val_chars > 100000);
    CHECK(val_chars < 120000);
    CHECK(loss_per_char == Approx(loss_per_token * val_tokens / val_chars).margin(1e-4));

    // The attention map labels tokens, turned to read upwards.
    const std::string svg = read_file(dir + "/run/attention.svg");
    CHECK(svg.find("rotate(-90") != std::string::npos);

    // The checkpoint holds the tokens' bytes: sampling needs no tokenizer file.
    fs::rename(model, model + ".moved");
    CommandResult sampled = run("--sample-only " + dir + "/run/train_gpt.safetensors --sample-tokens 30");
    INFO(sampled.out);
    CHECK(sampled.status == 0);
    CHECK(sampled.out.size() > 30); // 30 tokens of at least a byte each
    // Resuming encodes the text again: it needs the tokenizer, and the same one.
    expect(run("--resume " + dir + "/run/train_gpt.safetensors --max-iters 12"), "--tokenizer " + model + ": ");
    write_model(model, 200);
    expect(run("--resume " + dir + "/run/train_gpt.safetensors --max-iters 12"),
           "is not the tokenizer the checkpoint was trained with");
    fs::rename(model + ".moved", model);
    CommandResult resumed = run("--resume " + dir + "/run/train_gpt.safetensors --max-iters 12 --sample-tokens 5");
    INFO(resumed.out);
    CHECK(resumed.status == 0);
    CHECK(resumed.out.find("resuming at step 10") != std::string::npos);
    expect(run("--resume " + dir + "/run/train_gpt.safetensors --max-iters 14 --tokenizer gpt2"),
           "--tokenizer cannot change when resuming");
    fs::remove_all(dir);
}

TEST_CASE("train_gpt refuses a tokenizer it cannot use, with status 2", "[train_gpt][bpe][errors]") {
    const std::string dir = scratch_dir("bpe_errors");
    expect(run("--tokenizer " + dir + "/none.model --out " + dir), "--tokenizer " + dir + "/none.model: ");
    expect(run("--tokenizer chars --out " + dir), "train_gpt's characters are the default");
    expect(run("--tokenizer \"\" --out " + dir), "--tokenizer needs gpt2 or a .model file");
    { std::ofstream(dir + "/bad.model") << "not a model\n"; }
    expect(run("--tokenizer " + dir + "/bad.model --out " + dir), "not a minbpe v1 model file");
    // Nothing was written: every refusal came before the first step.
    CHECK_FALSE(fs::exists(dir + "/train_gpt.safetensors"));
    fs::remove_all(dir);
}
