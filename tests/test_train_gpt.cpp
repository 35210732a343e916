// train_gpt (examples/train_gpt.cpp): its first training losses match its
// PyTorch twin's (examples/train_gpt.py) on the generated play; a resumed
// run and a run interrupted with Ctrl-C continue exactly; bad input exits
// with status 2 and a clear message, losing nothing saved; --summary prints
// the model's table. Also: tiny Shakespeare (data/tinyshakespeare.txt) is
// whole, and the lecture's stages start on it as the twin's do.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "../examples/train/corpus.h"
#include "../examples/train/data.h"
#include "check.h"
#include "process.h"

using namespace ember;
using namespace ember::testing;
namespace fs = std::filesystem;

namespace {

const std::string kProgram = std::string(EMBER_EXAMPLES_DIR) + "/train_gpt";

// Runs train_gpt with `args` (a shell-quoted string): its exit status, and
// stdout and stderr together in `out`.
CommandResult run(const std::string& args) { return run_command(kProgram + " " + args + " 2>&1"); }

// A fresh empty directory for one test's outputs.
std::string scratch_dir(const std::string& name) {
    fs::path dir = fs::temp_directory_path() / ("ember_train_gpt_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir.string();
}

// Column `column` of losses.csv, for the rows that have it.
std::vector<double> csv_column(const std::string& path, int column) {
    std::ifstream in(path);
    REQUIRE(in);
    std::string line;
    std::getline(in, line); // header
    std::vector<double> values;
    while (std::getline(in, line)) {
        std::stringstream fields(line);
        std::string field;
        for (int c = 0; c <= column; ++c) std::getline(fields, field, ',');
        if (!field.empty()) values.push_back(std::stod(field));
    }
    return values;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

TEST_CASE("the generated corpus is the one the PyTorch twin generates", "[train_gpt]") {
    const Fixtures& f = fixtures("train");
    std::string text = train::default_corpus();
    CHECK(static_cast<int64_t>(text.size()) == f.tensor("corpus.length").item<int64_t>());
    CHECK(static_cast<int64_t>(train::fingerprint(text)) == f.tensor("corpus.fingerprint").item<int64_t>());
    CHECK(text.substr(0, 300) == f.text("corpus.head"));
}

TEST_CASE("tiny Shakespeare ships whole", "[train_gpt][data]") {
    // data/tinyshakespeare.txt: the lecture's text, byte for byte (size, first line,
    // vocabulary, and its FNV-1a fingerprint computed in Python).
    std::string text = read_file(std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt");
    REQUIRE(text.size() == 1115394);
    CHECK(text.rfind("First Citizen:\nBefore we proceed any further, hear me speak.\n", 0) == 0);
    CHECK(train::Vocab::from_text(text).chars() ==
          "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
    CHECK(train::fingerprint(text) == 0x8c00862c831d9e7aull);
}

TEST_CASE("on tiny Shakespeare, train_gpt's first losses match its PyTorch twin's", "[train_gpt][data]") {
    const Fixtures& f = fixtures("train");
    const std::string data = std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt";
    for (const char* preset : {"bigram", "embed", "head", "multihead", "ffwd"}) {
        DYNAMIC_SECTION(preset) {
            std::string dir = scratch_dir(std::string("shakespeare_") + preset);
            CommandResult r = run("--data " + data + " --preset " + preset +
                                  " --max-iters 10 --eval-iters 2 --sample-tokens 20 --out " + dir);
            INFO(r.out);
            REQUIRE(r.status == 0);
            CHECK(r.out.find("vocabulary of 65") != std::string::npos);
            CHECK(r.out.find("expected starting loss ln(65) = 4.1744") != std::string::npos);
            const std::string key = std::string("shakespeare.") + preset;
            require_close(from_vector(csv_column(dir + "/losses.csv", 1), {}, kFloat64), f.tensor(key + ".step_losses"),
                          {0, 1e-4}, "training losses");
            std::vector<double> val = csv_column(dir + "/losses.csv", 3);
            std::string last = r.out.substr(r.out.rfind("final: "));
            val.push_back(std::stod(last.substr(last.find("val_loss=") + 9)));
            require_close(from_vector(val, {}, kFloat64), f.tensor(key + ".eval_val"), {0, 2e-4}, "val losses");
            fs::remove_all(dir);
        }
    }
}

TEST_CASE("train_gpt's first 10 losses match its PyTorch twin's", "[train_gpt]") {
    const Fixtures& f = fixtures("train");
    for (const char* preset : {"default", "bigram", "blocks", "layernorm"}) {
        DYNAMIC_SECTION(preset) {
            std::string dir = scratch_dir(preset);
            CommandResult r =
                run(std::string("--preset ") + preset + " --max-iters 10 --sample-tokens 20 --out " + dir);
            INFO(r.out);
            REQUIRE(r.status == 0);
            // Losses are printed with 6 decimals; PyTorch's kernels round differently in the last bits.
            std::vector<double> losses = csv_column(dir + "/losses.csv", 1);
            require_close(from_vector(losses, {}, kFloat64), f.tensor(std::string(preset) + ".step_losses"), {0, 1e-4},
                          "training losses");
            require_close(from_vector(csv_column(dir + "/losses.csv", 3), {}, kFloat64),
                          f.tensor(std::string(preset) + ".eval_val"), {0, 1e-4}, "val losses");
            // The last line is machine-readable.
            std::string last = r.out.substr(r.out.rfind("final: "));
            CHECK(last.rfind("final: step=10 train_loss=", 0) == 0);
            double final_val = std::stod(last.substr(last.find("val_loss=") + 9));
            CHECK(final_val == Approx(f.tensor(std::string(preset) + ".final_val").item<double>()).margin(2e-4));
            CHECK(last.find("val_loss=") != std::string::npos);
            CHECK(last.find("tokens_per_s=") != std::string::npos);
            CHECK(fs::exists(dir + "/loss.svg"));
            CHECK(fs::exists(dir + "/train_gpt.safetensors"));
            // Models with attention draw every head: 3 layers of 4 in these presets.
            if (std::string(preset) == "bigram") {
                CHECK_FALSE(fs::exists(dir + "/attention.svg"));
            } else {
                std::string svg = read_file(dir + "/attention.svg");
                int titles = 0;
                for (size_t at = svg.find(", head "); at != std::string::npos; at = svg.find(", head ", at + 1))
                    ++titles;
                CHECK(titles == 12);
                CHECK(r.out.find(dir + "/attention.svg") != std::string::npos);
            }
            fs::remove_all(dir);
        }
    }
}

TEST_CASE("a resumed run continues exactly as an uninterrupted one", "[train_gpt]") {
    std::string whole = scratch_dir("whole"), parts = scratch_dir("parts");
    REQUIRE(run("--preset blocks --max-iters 12 --eval-interval 5 --eval-iters 4 --sample-tokens 40 --out " + whole)
                .status == 0);
    REQUIRE(run("--preset blocks --max-iters 7 --eval-interval 5 --eval-iters 4 --sample-tokens 40 --out " + parts)
                .status == 0);
    CommandResult resumed =
        run("--resume " + parts + "/train_gpt.safetensors --max-iters 12 --sample-tokens 40 --out " + parts);
    INFO(resumed.out);
    REQUIRE(resumed.status == 0);
    CHECK(read_file(parts + "/losses.csv") == read_file(whole + "/losses.csv"));
    CHECK(read_file(parts + "/sample.txt") == read_file(whole + "/sample.txt"));
    // Sampling from the checkpoint alone gives the same text.
    CommandResult sampled = run("--sample-only " + whole + "/train_gpt.safetensors --sample-tokens 40");
    REQUIRE(sampled.status == 0);
    CHECK(sampled.out.find(read_file(whole + "/sample.txt").substr(0, 40)) != std::string::npos);
    fs::remove_all(whole);
    fs::remove_all(parts);
}

TEST_CASE("Ctrl-C saves a checkpoint that resumes exactly", "[train_gpt]") {
    std::string dir = scratch_dir("interrupt"), whole = scratch_dir("interrupt_whole");
    const std::string args = "--preset blocks --max-iters 200 --eval-interval 100 --eval-iters 2 --sample-tokens 10";
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::string log = dir + "/log.txt";
        if (!freopen(log.c_str(), "w", stdout)) _exit(99);
        execl(kProgram.c_str(), "train_gpt", "--preset", "blocks", "--max-iters", "200", "--eval-interval", "100",
              "--eval-iters", "2", "--sample-tokens", "10", "--out", dir.c_str(), static_cast<char*>(nullptr));
        _exit(98);
    }
    // Wait until training has started, then interrupt it.
    for (int i = 0; i < 600 && read_file(dir + "/log.txt").find("step 0:") == std::string::npos; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(child, SIGINT);
    int status = 0;
    waitpid(child, &status, 0);
    INFO(read_file(dir + "/log.txt"));
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0) SUCCEED("training finished before the signal arrived; nothing to resume");
    else {
        CHECK(WEXITSTATUS(status) == 130);
        CHECK(read_file(dir + "/log.txt").find("checkpoint saved") != std::string::npos);
        CommandResult resumed = run("--resume " + dir + "/train_gpt.safetensors --sample-tokens 10 --out " + dir);
        INFO(resumed.out);
        REQUIRE(resumed.status == 0);
        REQUIRE(run(args + " --out " + whole).status == 0);
        CHECK(read_file(dir + "/losses.csv") == read_file(whole + "/losses.csv"));
    }
    fs::remove_all(dir);
    fs::remove_all(whole);
}

TEST_CASE("--summary prints the model's table and exits without training", "[train_gpt][summary]") {
    std::string dir = scratch_dir("summary");
    std::string text;
    for (int i = 0; i < 200; ++i) text += "abcdefghi\n"; // a vocabulary of 10
    std::ofstream(dir + "/ten.txt") << text;
    CommandResult r = run("--summary --data " + dir + "/ten.txt --out " + dir);
    INFO(r.out);
    CHECK(r.status == 0);
    // The default GPT (n_embd 64, 4 heads, 3 layers, block 64) for V = 10:
    // embeddings 10*64 + 64*64; per block 4 heads * 3 * 64*16, proj 64*64 +
    // 64, MLP 64*256 + 256 + 256*64 + 64, two LayerNorms 2*128; ln_f 128;
    // lm_head 64*10 + 10.
    const int64_t per_block = 4 * 3 * 64 * 16 + (64 * 64 + 64) + (64 * 256 + 256 + 256 * 64 + 64) + 2 * 128;
    const int64_t total = 10 * 64 + 64 * 64 + 3 * per_block + 128 + (64 * 10 + 10);
    CHECK(total == 154890);
    CHECK(r.out.find("Total params: 154,890\n") != std::string::npos);
    CHECK(r.out.find("│    │    └─MultiHeadAttention (blocks.2.sa): 3-10") != std::string::npos);
    CHECK(r.out.find("├─Linear (lm_head): 1-5") != std::string::npos);
    CHECK(r.out.find("[32, 64, 10]") != std::string::npos); // the logits of one batch (B,T,V)
    CHECK(r.out.find("step") == std::string::npos);         // no training
    CHECK_FALSE(fs::exists(dir + "/train_gpt.safetensors"));
    fs::remove_all(dir);
}

TEST_CASE("bad input exits with status 2 and a clear message, losing nothing", "[train_gpt][errors]") {
    std::string dir = scratch_dir("errors");
    auto expect = [](const CommandResult& r, const std::string& words) {
        INFO(r.out);
        CHECK(r.status == 2);
        CHECK(r.out.find(words) != std::string::npos);
    };
    expect(run("--bogus 1"), "unknown option --bogus");
    expect(run("--preset huge"), "unknown preset");
    expect(run("--n-embd abc"), "expects a number");
    expect(run("--n-embd 30 --n-head 4"), "divisible");
    expect(run("--max-iters"), "needs a value");
    expect(run("--data /no/such/file.txt"), "cannot read");
    std::ofstream(dir + "/empty.txt").close();
    expect(run("--data " + dir + "/empty.txt"), "is empty");
    std::ofstream(dir + "/short.txt") << "hello world, too short";
    expect(run("--data " + dir + "/short.txt --block-size 8"), "not longer than block_size");
    expect(run("--preset bigram --attention-map " + dir + "/a.svg"), "no attention");
    // A corrupt checkpoint is refused and left as it was.
    std::ofstream(dir + "/bad.safetensors") << "not a checkpoint at all";
    expect(run("--resume " + dir + "/bad.safetensors"), "safetensors");
    expect(run("--sample-only " + dir + "/bad.safetensors"), "safetensors");
    CHECK(read_file(dir + "/bad.safetensors") == "not a checkpoint at all");
    // A checkpoint of another model or other data is refused too.
    REQUIRE(run("--preset bigram --max-iters 2 --eval-iters 1 --sample-tokens 5 --out " + dir).status == 0);
    std::string good = read_file(dir + "/train_gpt.safetensors");
    expect(run("--resume " + dir + "/train_gpt.safetensors --n-embd 64"), "cannot change when resuming");
    std::ofstream(dir + "/other.txt") << std::string(200, 'x') + std::string(200, 'y');
    expect(run("--resume " + dir + "/train_gpt.safetensors --max-iters 4 --data " + dir + "/other.txt"), "other data");
    expect(run("--resume " + dir + "/train_gpt.safetensors"), "larger --max-iters");
    CHECK(read_file(dir + "/train_gpt.safetensors") == good);
    fs::remove_all(dir);
}
