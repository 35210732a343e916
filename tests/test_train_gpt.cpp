// train_gpt (examples/train_gpt.cpp): its first training losses match its
// PyTorch twin's (examples/train_gpt.py) on the generated play, also with
// clipped gradients; a resumed run and a run interrupted with Ctrl-C
// continue exactly; bad input exits with status 2 and a clear message,
// losing nothing saved; a run that diverges stops with status 3 and keeps
// its last good checkpoint; a run too large for the machine is refused
// before it allocates (examples/train/memory.h, checked against measured
// peaks); --summary prints the model's table. Also: tiny Shakespeare
// (data/tinyshakespeare.txt) is whole, and the lecture's stages start on it
// as the twin's do.
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
#include "../examples/train/guard.h"
#include "../examples/train/memory.h"
#include "../examples/train/model.h"
#include "../examples/train/options.h"
#include "../examples/train/run_state.h"
#include "check.h"
#include "core/kernels/dispatch.h"
#include "process.h"
#include "train_gpt_run.h"

using namespace ember;
using namespace ember::testing;
namespace fs = std::filesystem;

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

namespace {

// train_gpt's first 10 losses, its evaluations and its files for `preset`
// ("clipped": the default preset with its gradients clipped to norm 0.5).
void check_first_losses(const char* preset) {
    const Fixtures& f = fixtures("train");
    std::string dir = scratch_dir(preset);
    std::string flags = std::string(preset) == "clipped" ? "--max-grad-norm 0.5" : std::string("--preset ") + preset;
    CommandResult r = run(flags + " --max-iters 10 --sample-tokens 20 --out " + dir);
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
        for (size_t at = svg.find(", head "); at != std::string::npos; at = svg.find(", head ", at + 1)) ++titles;
        CHECK(titles == 12);
        CHECK(r.out.find(dir + "/attention.svg") != std::string::npos);
    }
    fs::remove_all(dir);
}

} // namespace

TEST_CASE("train_gpt's first 10 losses match its PyTorch twin's", "[train_gpt]") {
    for (const char* preset : {"default", "bigram"}) {
        DYNAMIC_SECTION(preset) check_first_losses(preset);
    }
}

// The same for three more presets: [heavy], left to the optimised builds.
TEST_CASE("train_gpt's first 10 losses match its PyTorch twin's: more presets", "[train_gpt][heavy]") {
    for (const char* preset : {"blocks", "layernorm", "clipped"}) {
        DYNAMIC_SECTION(preset) check_first_losses(preset);
    }
}

TEST_CASE("the learning rate follows nanoGPT's get_lr", "[train_gpt][schedule]") {
    train::Options o;
    o.lr = 1e-3, o.warmup_iters = 100, o.lr_decay_iters = 2000, o.min_lr = 1e-4;
    // Warm-up: lr * (it + 1) / (warmup_iters + 1).
    CHECK(train::learning_rate_at(o, 0) == Approx(1e-3 / 101));
    CHECK(train::learning_rate_at(o, 99) == Approx(1e-3 * 100 / 101));
    // The cosine: cos(0) = 1 at its start, cos(pi/2) = 0 halfway, cos(pi) = -1 at its end.
    CHECK(train::learning_rate_at(o, 100) == Approx(1e-3));
    CHECK(train::learning_rate_at(o, 1050) == Approx(1e-4 + 0.5 * (1e-3 - 1e-4)));
    CHECK(train::learning_rate_at(o, 2000) == Approx(1e-4));
    CHECK(train::learning_rate_at(o, 5000) == Approx(1e-4));
    // Without --min-lr, lr / 10; without decay, lr after the warm-up.
    o.min_lr = NAN;
    CHECK(train::learning_rate_at(o, 2000) == Approx(1e-4));
    o.lr_decay_iters = 0;
    CHECK(train::learning_rate_at(o, 3000) == Approx(1e-3));
    // The defaults: --lr at every step, as before.
    CHECK(train::learning_rate_at(train::Options{}, 0) == train::Options{}.lr);
}

TEST_CASE("a resumed run continues exactly as an uninterrupted one", "[train_gpt]") {
    // A stage preset (the lecture's classes), and gpt.py's GPT in either model;
    // each checkpoint says which model it holds, and --resume and
    // --sample-only build that one.
    const std::string small = " --n-embd 16 --n-head 2 --n-layer 1 --block-size 16 --batch-size 8";
    for (const auto& [flags, model] :
         {std::pair<std::string, std::string>{"--preset blocks", "lecture"},
          {"--model lecture" + small, "lecture"},
          {"--model fast --dropout 0.1" + small, "fast"},
          // nanoGPT's tools: the schedule, AdamW's settings and the
          // accumulation are in the checkpoint (resuming without
          // them would take other steps)
          {"--model fast" + small +
               " --warmup-iters 3 --lr-decay-iters 10 --min-lr 1e-4 --beta2 0.99"
               " --weight-decay 0.1 --grad-accum 2",
           "fast"},
          // nanoGPT's model, untied and with biases: both in the checkpoint
          {"--model nanogpt --bias yes --tie-weights no --dropout 0.1" + small + " --weight-decay 0.1", "nanogpt"}}) {
        INFO(flags);
        std::string whole = scratch_dir("whole"), parts = scratch_dir("parts");
        REQUIRE(
            run(flags + " --max-iters 12 --eval-interval 5 --eval-iters 4 --sample-tokens 40 --out " + whole).status ==
            0);
        REQUIRE(
            run(flags + " --max-iters 7 --eval-interval 5 --eval-iters 4 --sample-tokens 40 --out " + parts).status ==
            0);
        nn::Metadata meta;
        nn::load_safetensors(parts + "/train_gpt.safetensors", &meta);
        CHECK(meta["model"] == model);
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
        // The checkpoint fixes the model.
        CommandResult other = run("--resume " + parts + "/train_gpt.safetensors --model lecture --out " + parts);
        CHECK(other.status == 2);
        CHECK(other.out.find("--model cannot change when resuming") != std::string::npos);
        if (flags.find("--lr-decay-iters 10") != std::string::npos) {
            // A changed schedule is checked against the checkpoint's: a warm-up
            // as long as its decay would divide 0 by 0.
            CommandResult clash = run("--resume " + parts + "/train_gpt.safetensors --warmup-iters 10 --out " + parts);
            CHECK(clash.status == 2);
            CHECK(clash.out.find("--lr-decay-iters (10) must be past the warm-up, --warmup-iters (10)") !=
                  std::string::npos);
        }
        fs::remove_all(whole);
        fs::remove_all(parts);
    }
}

TEST_CASE("Ctrl-C saves a checkpoint that resumes exactly", "[train_gpt]") {
    std::string dir = scratch_dir("interrupt"), whole = scratch_dir("interrupt_whole");
    const std::string args = "--preset blocks --max-iters 200 --eval-interval 100 --eval-iters 2 --sample-tokens 10";
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::string log = dir + "/log.txt";
        if (!freopen(log.c_str(), "w", stdout)) _exit(99);
        exec_train_gpt({"--preset", "blocks", "--max-iters", "200", "--eval-interval", "100", "--eval-iters", "2",
                        "--sample-tokens", "10", "--out", dir});
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
    // The fast model by default, in GPT-2's names; the lecture's classes on request.
    CHECK(r.out.find("│    └─CausalSelfAttention (transformer.h.2.attn): 2-10") != std::string::npos);
    CHECK(r.out.find("├─Linear (lm_head): 1-8") != std::string::npos);
    CHECK(r.out.find("[32, 64, 10]") != std::string::npos); // the logits of one batch (B,T,V)
    CHECK(r.out.find("step") == std::string::npos);         // no training
    CHECK_FALSE(fs::exists(dir + "/train_gpt.safetensors"));
    CommandResult lecture = run("--summary --model lecture --data " + dir + "/ten.txt --out " + dir);
    CHECK(lecture.out.find("Total params: 154,890\n") != std::string::npos);
    CHECK(lecture.out.find("│    │    └─MultiHeadAttention (blocks.2.sa): 3-10") != std::string::npos);
    CHECK(lecture.out.find("├─Linear (lm_head): 1-5") != std::string::npos);
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
    expect(run("--bogus --out o"), "unknown option --bogus"); // the flag, not the word after it
    expect(run("--out o --bogus"), "unknown option --bogus");
    expect(run("--preset huge"), "--preset: unknown preset");
    expect(run("--lr inf"), "--lr expects a finite number");
    expect(run("--max-grad-norm 0"), "--max-grad-norm must be a positive number");
    expect(run("--max-grad-norm abc"), "--max-grad-norm expects a finite number");
    expect(run("--warmup-iters 100 --lr-decay-iters 50"), "--lr-decay-iters (50) must be past the warm-up");
    expect(run("--lr 0.001 --min-lr 0.01"), "--min-lr (0.01) must not exceed --lr (0.001)");
    expect(run("--beta2 1"), "--beta2 must be below 1");
    expect(run("--beta1 -0.1"), "--beta1");
    expect(run("--grad-accum 0"), "--grad-accum");
    expect(run("--weight-decay -1"), "--weight-decay");
    expect(run("--bias yes"), "--bias is an option of the nanoGPT model (--model nanogpt)");
    expect(run("--model nanogpt --tie-weights maybe"), "--tie-weights expects yes or no");
    expect(run("--model nano"), "unknown model \"nano\" (lecture, fast or nanogpt)");
    std::ofstream(dir + "/a_file") << "x";
    expect(run("--preset bigram --out " + dir + "/a_file"), "--out " + dir + "/a_file: cannot make it a directory");
    expect(run("--n-embd abc"), "--n-embd expects an integer");
    expect(run("--n-embd 30 --n-head 4"), "divisible");
    expect(run("--max-iters"), "needs a value");
    expect(run("--threads 0"), "--threads must be between 1 and " + std::to_string(max_num_threads()));
    expect(run("--threads 100000"), "--threads must be between 1 and " + std::to_string(max_num_threads()));
    expect(run("--data /no/such/file.txt"), "--data /no/such/file.txt: cannot read it: No such file or directory");
    expect(run("--data " + dir), "--data " + dir + " is a directory");
    expect(run("--data /dev/null"), "--data /dev/null is not a regular file");
    std::ofstream(dir + "/empty.txt").close();
    expect(run("--data " + dir + "/empty.txt"), "--data " + dir + "/empty.txt is empty");
    std::ofstream(dir + "/short.txt") << "hello world, too short";
    expect(run("--data " + dir + "/short.txt --block-size 8"), "/short.txt is too short");
    std::ofstream(dir + "/binary.bin") << std::string(500, 'a') + std::string(1, '\0') + std::string(500, 'b');
    expect(run("--data " + dir + "/binary.bin"), "/binary.bin is not text: it holds a NUL byte at offset 500");
    std::ofstream(dir + "/latin1.txt") << std::string(500, 'a') + "caf\xe9 " + std::string(500, 'b');
    expect(run("--data " + dir + "/latin1.txt"), "/latin1.txt is not UTF-8 text: byte 0xe9 at offset 503");
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

TEST_CASE("a checkpoint with malformed settings or histories is refused with status 2, naming the field",
          "[train_gpt][errors]") {
    // Found by fuzzing read_run (tests/libfuzzer/): a data_fingerprint that
    // is not a number escaped as std::invalid_argument ("internal error",
    // status 1), and a history of another dtype as a DTypeError.
    std::string dir = scratch_dir("malformed");
    REQUIRE(run("--preset bigram --max-iters 2 --eval-iters 1 --sample-tokens 5 --out " + dir).status == 0);
    nn::Metadata meta;
    const nn::StateDict good = nn::load_safetensors(dir + "/train_gpt.safetensors", &meta);
    auto expect_refused = [&](const nn::StateDict& tensors, const nn::Metadata& metadata, const std::string& words) {
        nn::save_safetensors(tensors, dir + "/bad.safetensors", metadata);
        CommandResult r = run("--resume " + dir + "/bad.safetensors --max-iters 4 --out " + dir);
        INFO(r.out);
        CHECK(r.status == 2);
        CHECK(r.out.find("is not a usable train_gpt checkpoint: " + words) != std::string::npos);
        CHECK(r.out.find("internal error") == std::string::npos);
    };
    for (const char* value : {"x234", "", "-1", "12x", "99999999999999999999999"}) {
        nn::Metadata bad = meta;
        bad["data_fingerprint"] = value;
        expect_refused(good, bad, "\"data_fingerprint\" is not a number");
    }
    for (const auto& [key, dtype] : std::vector<std::pair<std::string, DType>>{
             {"vocab", kFloat64}, {"step_losses", kInt64}, {"eval_train", kFloat32}, {"rng_state", kFloat64}}) {
        nn::StateDict bad;
        for (const auto& [name, t] : good) bad.insert(name, name == key ? t.to(dtype) : t);
        expect_refused(bad, meta, "its \"" + key + "\" tensor is " + dtype_name(dtype));
    }
    nn::StateDict bad;
    for (const auto& [name, t] : good) bad.insert(name, name == "vocab" ? t + 256 : t);
    expect_refused(bad, meta, "its vocabulary holds 266, not a byte");
    fs::remove_all(dir);
}

TEST_CASE("a run with a seed past 2^63 resumes", "[train_gpt]") {
    // --seed takes any uint64; the checkpoint read it back as int64 and said
    // "seed" was not a number (found reading read_run for the fuzzer).
    std::string dir = scratch_dir("big_seed");
    REQUIRE(
        run("--preset bigram --max-iters 2 --eval-iters 1 --sample-tokens 5 --seed 18446744073709551615 --out " + dir)
            .status == 0);
    CommandResult r = run("--resume " + dir + "/train_gpt.safetensors --max-iters 3 --sample-tokens 5 --out " + dir);
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(train::read_run(dir + "/train_gpt.safetensors").options.seed == 18446744073709551615ull);
    fs::remove_all(dir);
}

TEST_CASE("an unreadable data file says so, with the system's reason", "[train_gpt][errors]") {
    // Root reads any file, so the reader runs in a child process that has
    // given up root (as user nobody) when the test runs as root.
    std::string dir = scratch_dir("unreadable");
    std::string path = dir + "/secret.txt";
    std::ofstream(path) << std::string(1000, 'x');
    fs::permissions(path, fs::perms::none);
    fs::permissions(dir, fs::perms::all);
    int pipe_fds[2];
    REQUIRE(pipe(pipe_fds) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        close(pipe_fds[0]);
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(97);
        std::string message = "no error";
        try {
            train::read_text_file(path);
        } catch (const train::InputError& e) {
            message = e.what();
        }
        if (write(pipe_fds[1], message.data(), message.size()) < 0) _exit(98);
        _exit(0);
    }
    close(pipe_fds[1]);
    std::string message;
    char buffer[512];
    for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, static_cast<size_t>(n));
    close(pipe_fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    CHECK(message == "--data " + path + ": cannot read it: Permission denied");
    fs::remove_all(dir);
}

TEST_CASE("a text with Windows line ends (CRLF) is read byte for byte", "[train_gpt][data]") {
    // ember reads a text in binary on every system: "\r\n" stays two
    // characters, so a file gives the same vocabulary and losses on Linux
    // and on Windows (where a text-mode read would drop each '\r').
    // .ci/windows replays corpus/text_data's CRLF files under Wine the same way.
    std::string dir = scratch_dir("crlf");
    const std::string path = dir + "/play in crlf.txt", text = "First Citizen:\r\nBefore we proceed.\r\n\r\nAll:\r\n";
    std::ofstream(path, std::ios::binary) << text;
    CHECK(train::read_text_file(path) == text);
    const train::Vocab vocab = train::Vocab::from_text(train::read_text_file(path));
    CHECK(vocab.chars().find('\r') != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("a diverging run stops at once with status 3, says why, and keeps the last good checkpoint",
          "[train_gpt][diverge]") {
    // --lr 1e4 (the report) overflows the default model within a few
    // steps; before, it trained on NaN for 300 steps and saved NaN weights.
    std::string dir = scratch_dir("diverge");
    REQUIRE(run("--preset bigram --max-iters 2 --eval-iters 1 --sample-tokens 5 --out " + dir).status == 0);
    const std::string good = read_file(dir + "/train_gpt.safetensors");
    CommandResult r = run("--lr 1e4 --max-iters 300 --eval-iters 1 --overwrite --out " + dir);
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(r.out.find("training diverged at step ") != std::string::npos);
    CHECK(r.out.find("--lr 10000") != std::string::npos);
    CHECK(r.out.find("Try a lower --lr (1000, a tenth), or clip the gradients with --max-grad-norm 1") !=
          std::string::npos);
    CHECK(r.out.find("No checkpoint was written") != std::string::npos);
    CHECK(r.out.find("final:") == std::string::npos);
    CHECK(read_file(dir + "/train_gpt.safetensors") == good); // the earlier run's checkpoint, untouched

    // Evaluating (and so saving) every step: the checkpoint of the last
    // evaluation before the bad step is kept, holds finite weights, and a
    // gentler run resumes from it. (The rising val loss would stop the run
    // first: a ratio of 1e300 leaves the stop to the infinity.)
    std::string every = scratch_dir("diverge_every");
    r = run("--lr 1e4 --max-iters 300 --eval-interval 1 --eval-iters 1 --divergence-ratio 1e300 --out " + every);
    INFO(r.out);
    REQUIRE(r.status == 3);
    const size_t at = r.out.find("diverged at step ") + 17;
    const int64_t bad_step = std::stoll(r.out.substr(at));
    CHECK(r.out.find("The last good checkpoint, " + every + "/train_gpt.safetensors (step " + std::to_string(bad_step) +
                     "), is kept") != std::string::npos);
    train::RunState saved = train::read_run(every + "/train_gpt.safetensors");
    CHECK(saved.next_step == bad_step);
    CHECK(static_cast<int64_t>(saved.step_losses.size()) == bad_step);
    CHECK(csv_column(every + "/losses.csv", 1).size() == static_cast<size_t>(bad_step));
    nn::StateDict weights = nn::load_safetensors(every + "/train_gpt.safetensors");
    for (const auto& [name, t] : weights)
        if (t.is_floating_point() && name != "eval_train" && name != "eval_val") {
            INFO(name);
            CHECK(sum(abs(t) < INFINITY).item<int64_t>() == t.numel()); // finite, if huge
        }
    CommandResult gentle =
        run("--resume " + every +
            "/train_gpt.safetensors --lr 1e-5 --max-grad-norm 1 --divergence-ratio 1e300 --max-iters " +
            std::to_string(bad_step + 3) + " --sample-tokens 5 --out " + every);
    INFO(gentle.out);
    CHECK(gentle.status == 0);
    CHECK(train::read_run(every + "/train_gpt.safetensors").options.max_grad_norm == 1.0);
    fs::remove_all(dir);
    fs::remove_all(every);
}

TEST_CASE("a checkpoint is never written from weights that are not finite", "[train_gpt][diverge]") {
    std::string dir = scratch_dir("nan_weights");
    const std::string path = dir + "/train_gpt.safetensors";
    std::ofstream(path) << "the previous checkpoint";
    train::RunState run_state;
    run_state.options.model = {.stage = train::Stage::Bigram, .vocab_size = 5, .block_size = 4};
    run_state.vocab = train::Vocab::from_text("abcde");
    auto model = train::make_model(run_state.options.model);
    optim::AdamW optimizer(model->parameters());
    {
        NoGradGuard no_grad;
        model->parameters()[0].view({-1})[3].fill_(NAN);
    }
    CHECK_THROWS_WITH(train::save_run(path, run_state, *model, optimizer),
                      Catch::Contains("refusing to write " + path) &&
                          Catch::Contains("token_embedding_table.weight holds NaN or infinity"));
    CHECK(read_file(path) == "the previous checkpoint");
    {
        NoGradGuard no_grad;
        model->parameters()[0].view({-1})[3].fill_(INFINITY);
    }
    CHECK_THROWS_AS(train::save_run(path, run_state, *model, optimizer), train::DivergedError);
    CHECK(read_file(path) == "the previous checkpoint");
    fs::remove_all(dir);
}

TEST_CASE("train_gpt never overwrites a checkpoint with state that is not finite", "[train_gpt][diverge]") {
    // An infinity in AdamW's second moment leaves the loss, the gradients
    // and the weights finite (each update divides by it), so the divergence
    // check lets the steps run; the save before the next evaluation must
    // still refuse, and keep the checkpoint the run resumed from.
    std::string dir = scratch_dir("inf_state");
    REQUIRE(
        run("--preset bigram --max-iters 2 --eval-interval 2 --eval-iters 1 --sample-tokens 5 --out " + dir).status ==
        0);
    nn::Metadata meta;
    nn::StateDict state = nn::load_safetensors(dir + "/train_gpt.safetensors", &meta);
    nn::StateDict poisoned;
    for (const auto& [name, t] : state) {
        Tensor copy = t.clone();
        if (name.find("exp_avg_sq") != std::string::npos) copy.view({-1})[0].fill_(INFINITY);
        poisoned.insert(name, copy);
    }
    const std::string path = dir + "/train_gpt.safetensors";
    nn::save_safetensors(poisoned, path, meta);
    const std::string before = read_file(path);
    CommandResult r = run("--resume " + path + " --max-iters 6 --sample-tokens 5 --out " + dir);
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(r.out.find("refusing to write " + path) != std::string::npos);
    CHECK(r.out.find("exp_avg_sq holds NaN or infinity") != std::string::npos);
    CHECK(read_file(path) == before);
    fs::remove_all(dir);
}

TEST_CASE("a run too large for the machine is refused before it allocates, with both numbers", "[train_gpt][memory]") {
    // The two reports: these hung or exhausted the machine.
    for (const char* args : {"--n-embd 100000", "--batch-size 100000000", "--block-size 100000000 --n-layer 1"}) {
        DYNAMIC_SECTION(args) {
            const std::string dir = scratch_dir("huge");
            CommandResult r = run(std::string(args) + " --out " + dir);
            fs::remove_all(dir);
            INFO(r.out);
            CHECK(r.status == 2);
            CHECK(r.out.find("this run needs about ") != std::string::npos);
            CHECK(r.out.find("is available (") != std::string::npos);
            CHECK(r.out.find("use a smaller --n-embd, --n-layer, --batch-size or --block-size") != std::string::npos);
        }
    }
}

// AddressSanitizer reserves terabytes of address space at start, so a
// process under `ulimit -v` cannot even start in the sanitizer build.
#if !defined(EMBER_ASAN)
TEST_CASE("memory the machine will not give is an out-of-memory message, not a crash", "[train_gpt][memory]") {
    // ulimit -v caps the address space at 300 MB while MemAvailable, which
    // the estimate reads, stays large: the estimate (over 3 GB for this
    // 200M-parameter model) passes, and building the model fails. The library raises OutOfMemoryError
    // naming the op and the size (never std::bad_alloc, never an abort),
    // and train_gpt says so with status 2.
    std::string dir = scratch_dir("oom");
    CommandResult r =
        run_command("ulimit -v 300000 && " + kProgram + " --n-embd 2048 --n-layer 4 --out " + dir + " 2>&1");
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find("] out of memory: cannot allocate ") != std::string::npos);
    CHECK(r.out.find("use a smaller --n-embd, --n-layer, --batch-size or --block-size") != std::string::npos);
    CHECK(r.out.find("bad_alloc") == std::string::npos);
    CHECK(r.out.find("internal error") == std::string::npos);
    fs::remove_all(dir);
}
#endif

TEST_CASE("the parameter count is make_model's without building it", "[train_gpt][memory]") {
    using train::Stage;
    for (Stage stage : {Stage::Bigram, Stage::Head, Stage::MultiHead, Stage::FeedForward, Stage::Blocks,
                        Stage::LayerNorm, Stage::GPT}) {
        train::ModelConfig c{.stage = stage, .vocab_size = 7, .block_size = 5, .n_embd = 12, .n_head = 3, .n_layer = 2};
        INFO(train::stage_name(stage));
        CHECK(train::count_parameters(c) == static_cast<double>(train::make_model(c)->num_parameters()));
        c.kind = train::ModelKind::Lecture;
        CHECK(train::count_parameters(c) == static_cast<double>(train::make_model(c)->num_parameters()));
    }
    // nanoGPT's model, with and without biases and tying.
    for (bool bias : {false, true})
        for (bool tie : {true, false}) {
            train::ModelConfig c{.vocab_size = 7, .block_size = 5, .n_embd = 12, .n_head = 3, .n_layer = 2};
            c.kind = train::ModelKind::NanoGPT, c.bias = bias, c.tie_weights = tie;
            INFO("nanogpt, bias " << bias << ", tied " << tie);
            CHECK(train::count_parameters(c) == static_cast<double>(train::make_model(c)->num_parameters()));
        }
    // The macbook preset's model: nanoGPT prints "number of parameters: 0.80M"
    // for it, excluding the position table (64 x 128): 804,096 - 8,192 = 795,904.
    train::ModelConfig macbook{.vocab_size = 65, .block_size = 64, .n_embd = 128, .n_head = 4, .n_layer = 4};
    macbook.kind = train::ModelKind::NanoGPT;
    CHECK(train::make_model(macbook)->num_parameters() == 804096);
}

TEST_CASE("the stage presets run the lecture's ops; the gpt stage's default, the fused attention",
          "[train_gpt][model]") {
    using train::Stage;
    for (Stage stage : {Stage::Head, Stage::MultiHead, Stage::FeedForward, Stage::Blocks, Stage::LayerNorm, Stage::GPT})
        for (train::ModelKind kind : {train::ModelKind::Lecture, train::ModelKind::Fast}) {
            train::ModelConfig c{.stage = stage,
                                 .vocab_size = 7,
                                 .block_size = 8,
                                 .n_embd = 12,
                                 .n_head = 3,
                                 .n_layer = 2,
                                 .kind = kind};
            INFO(train::stage_name(stage) << " (" << train::kind_name(kind) << ")");
            manual_seed(0);
            auto model = train::make_model(c);
            Tensor logits = model->forward(randint(0, 7, {2, 8}));
            std::map<std::string, int> ops = testing::graph_op_counts(logits);
            int heads = 0; // the lecture's Head modules
            for (const auto& [name, m] : model->named_modules()) heads += dynamic_cast<nn::Head*>(m) != nullptr;
            const int fused = ops["ScaledDotProductFlashAttentionForCpuBackward0"];
            if (stage == Stage::GPT && kind == train::ModelKind::Fast) {
                // One attention op per layer over all heads: the fused op's
                // node, or without the fast kernels its definition's masked_fill.
                CHECK(heads == 0);
                CHECK(fused + ops["MaskedFillBackward0"] == 2);
            } else {
                // Every Head's own masked_fill and softmax: the notebook's lines.
                CHECK(heads > 0);
                CHECK(fused == 0);
                CHECK(ops["MaskedFillBackward0"] == heads);
                CHECK(ops["SoftmaxBackward0"] == heads);
            }
        }
}

TEST_CASE("the memory estimate bounds a training step's measured peak, within a factor of 1.6", "[train_gpt][memory]") {
    // Peaks measured as ember's allocator counts them (memory_stats), over
    // everything a run holds: model, AdamW state, a step's graph and the
    // copy backward may make of a parameter's first gradient; the fast model
    // (the default) and the lecture's classes each. The three widths with
    // tiny batches are where that copy would be most of a step's peak.
    using train::Stage;
    const std::vector<std::pair<train::ModelConfig, int64_t>> runs = {
        {{.stage = Stage::GPT, .vocab_size = 65, .block_size = 8, .n_embd = 64, .n_head = 4, .n_layer = 1}, 1},
        {{.stage = Stage::GPT, .vocab_size = 65, .block_size = 8, .n_embd = 256, .n_head = 4, .n_layer = 1}, 1},
        {{.stage = Stage::GPT, .vocab_size = 65, .block_size = 8, .n_embd = 768, .n_head = 4, .n_layer = 1}, 1},
        {{.stage = Stage::GPT, .vocab_size = 53, .block_size = 64, .n_embd = 64, .n_head = 4, .n_layer = 3}, 8},
        {{.stage = Stage::GPT,
          .vocab_size = 65,
          .block_size = 32,
          .n_embd = 48,
          .n_head = 6,
          .n_layer = 2,
          .dropout = 0.2},
         16},
        {{.stage = Stage::GPT,
          .vocab_size = 65,
          .block_size = 32,
          .n_embd = 48,
          .n_head = 6,
          .n_layer = 2,
          .dropout = 0.2,
          .kind = train::ModelKind::Lecture},
         16},
        {{.stage = Stage::Blocks, .vocab_size = 65, .block_size = 16, .n_embd = 32, .n_head = 4, .n_layer = 3}, 16},
        {{.stage = Stage::Bigram, .vocab_size = 65, .block_size = 8}, 32},
    };
    for (const auto& [config, batch] : runs) {
        INFO(train::stage_name(config.stage) << " (" << train::kind_name(config.kind) << ") B=" << batch
                                             << " T=" << config.block_size << " C=" << config.n_embd);
        manual_seed(0);
        reset_peak_memory_stats();
        const size_t before = memory_stats().allocated;
        {
            auto model = train::make_model(config);
            optim::AdamW optimizer(model->parameters());
            Tensor data = randint(config.vocab_size, {batch * config.block_size + 1});
            for (int step = 0; step < 2; ++step) {
                auto [x, y] = train::get_batch(data, batch, config.block_size);
                Tensor logits = model->forward(x);
                Tensor loss = cross_entropy(logits.view({-1, logits.size(-1)}), y.reshape({-1}));
                optimizer.zero_grad();
                loss.backward();
                optim::clip_grad_norm_(model->parameters(), INFINITY); // measures the norm, as train_gpt does
                optimizer.step();
            }
        }
        const double measured = static_cast<double>(memory_stats().peak_allocated - before);
        const double estimate = train::estimate_memory(config, batch, 0).total();
        // The estimate is fitted to the default build. A reference build runs
        // fused attention and dropout by their definitions, which keep what
        // the kernels do not (the fast model's (B,NH,T,T) weights, dropout
        // masks as floats), so there it bounds only from the other side.
        if constexpr (internal::kFastKernelsBuilt) CHECK(measured <= estimate);
        // The factor holds for the buffer cache's counts, each buffer rounded
        // up to its size class. A reference build has no cache and counts
        // the bytes asked for, at most a quarter fewer: 1.6 * 1.25 there.
        const double factor = internal::kFastKernelsBuilt ? 1.6 : 1.6 * 1.25;
        INFO("measured " << measured << " bytes, estimated " << estimate);
        CHECK(estimate <= factor * measured);
    }
}

TEST_CASE("available memory is MemAvailable, or the cgroup's room when that is less", "[train_gpt][memory]") {
    std::string root = scratch_dir("meminfo");
    auto write = [&](const std::string& file, const std::string& text) {
        fs::create_directories(fs::path(root + file).parent_path());
        std::ofstream(root + file) << text;
    };
    CHECK_FALSE(train::available_memory(root).has_value()); // nothing readable: no limit
    write("/proc/meminfo", "MemTotal:       24684092 kB\nMemFree:  1000 kB\nMemAvailable:   2048 kB\n");
    auto limit = train::available_memory(root);
    REQUIRE(limit);
    CHECK(limit->bytes == 2048.0 * 1024);
    CHECK(limit->source == "MemAvailable in /proc/meminfo");
    // cgroup v2, the process in /box: its limit less its usage, when lower.
    write("/proc/self/cgroup", "0::/box\n");
    write("/sys/fs/cgroup/box/memory.max", "1048576\n");
    write("/sys/fs/cgroup/box/memory.current", "524288\n");
    CHECK(train::available_memory(root)->bytes == 524288);
    write("/sys/fs/cgroup/box/memory.max", "max\n"); // no limit there: MemAvailable again
    CHECK(train::available_memory(root)->bytes == 2048.0 * 1024);
    // cgroup v1, seen from inside a container (the mount's root).
    write("/proc/self/cgroup", "4:memory:/elsewhere\n");
    write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "1000000\n");
    write("/sys/fs/cgroup/memory/memory.usage_in_bytes", "400000\n");
    limit = train::available_memory(root);
    CHECK(limit->bytes == 600000);
    CHECK(limit->source == "the memory cgroup's limit less its usage");

    train::MemoryEstimate need{.parameters = 1 << 20, .activations = 3 << 20};
    CHECK(train::memory_problem(need, train::MemoryLimit{8 << 20, "test"}, "--x").empty());
    CHECK(train::memory_problem(need, std::nullopt, "--x").empty());
    CHECK(train::memory_problem(need, train::MemoryLimit{2 << 20, "test"}, "--x") ==
          "this run needs about 4.0 MiB of memory (parameters, gradients and AdamW state 1.0 MiB, activations of a "
          "batch 3.0 MiB), but only 2.0 MiB is available (test); use a smaller --x");
    // Under mpirun -np 3 on one machine the three need it three times over:
    // each rank compared itself alone with the whole machine.
    CHECK(train::memory_problem(need, train::MemoryLimit{8 << 20, "test"}, "--x", 3) ==
          "the 3 processes of this run on this machine need about 12.0 MiB, each 4.0 MiB of memory (parameters, "
          "gradients and AdamW state 1.0 MiB, activations of a batch 3.0 MiB), but only 8.0 MiB is available (test); "
          "use a smaller --x");
    fs::remove_all(root);
}
