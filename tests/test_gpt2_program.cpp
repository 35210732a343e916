// The gpt2 program (examples/gpt2.cpp) run as a learner runs it, on the
// PyTorch twin's GPT-2 checkpoint (tests/fixtures/pretrained_hf): it
// samples PyTorch's tokens for the same seed, with and without the cache,
// prints the text_loss of a file, finetunes and saves only improvements,
// and refuses bad command lines with status 2 and a message.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "check.h"
#include "fixtures.h"
#include "process.h"

using namespace ember;
using namespace ember::testing;

namespace {

const std::string kGPT2 = std::string(EMBER_EXAMPLES_DIR) + "/gpt2";
const std::string kModel = std::string(EMBER_FIXTURE_DIR) + "/pretrained_hf";

tokenizer::GPT2Tokenizer& gpt2_tokenizer() {
    static tokenizer::GPT2Tokenizer t = tokenizer::GPT2Tokenizer::load(std::string(EMBER_DATA_DIR) + "/gpt2");
    return t;
}

// A path for a scratch file or folder in the system's temporary folder,
// this process's own (the working folder stays clean).
std::string scratch_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("ember_test_gpt2_" + name + "_" + std::to_string(getpid())))
        .string();
}

} // namespace

TEST_CASE("gpt2 --prompt samples PyTorch's tokens for the same seed, streamed", "[gpt2_program]") {
    Fixtures f("pretrained");
    // the prompt's 4 ids, then 40 sampled by PyTorch: past n_positions (32) the context is cropped
    Tensor generated = f.tensor("gpt2.generated");
    std::vector<int> ids(generated.data_ptr<int64_t>(), generated.data_ptr<int64_t>() + generated.numel());
    REQUIRE(gpt2_tokenizer().encode("Hello, my dog") == std::vector<int>(ids.begin(), ids.begin() + 4));
    const std::string expected = gpt2_tokenizer().decode(ids);
    for (const std::string cache : {"", " --no-cache"}) {
        INFO(cache);
        CommandResult r = run_command(kGPT2 + " --model " + kModel +
                                      " --prompt 'Hello, my dog' --max-new-tokens 40 --seed 42 --temperature 0.8 "
                                      "--top-k 200" +
                                      cache);
        REQUIRE(r.status == 0);
        // a line about the model, the text, then the speed after "---"
        const size_t text_start = r.out.find('\n') + 1;
        CHECK(r.out.substr(0, text_start).find("huggingface layout") != std::string::npos);
        const size_t rule = r.out.find("\n---\n");
        REQUIRE(rule != std::string::npos);
        CHECK(r.out.substr(text_start, rule - text_start) == expected);
        CHECK(r.out.find("40 tokens in", rule) != std::string::npos);
        CHECK(r.out.find("tokens/s", rule) != std::string::npos);
    }
}

TEST_CASE("gpt2 --eval prints text_loss over the file's tokens", "[gpt2_program]") {
    const std::string text =
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\n"
        "You are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n";
    const std::string path = scratch_path("eval.txt");
    std::ofstream(path, std::ios::binary) << text;
    const std::vector<int> encoded = gpt2_tokenizer().encode(text);
    auto model = nn::fast::from_pretrained(kModel);
    nn::fast::TextLoss expected = nn::fast::text_loss(*model, std::vector<int64_t>(encoded.begin(), encoded.end()));
    CommandResult r = run_command(kGPT2 + " --model " + kModel + " --eval " + path + " 2>/dev/null");
    REQUIRE(r.status == 0);
    CHECK(r.out.find(std::to_string(encoded.size()) + " tokens") != std::string::npos);
    char line[128];
    std::snprintf(line, sizeof line, "mean cross-entropy %.4f nats/token", expected.mean);
    CHECK(r.out.find(line) != std::string::npos);
    CHECK(r.out.find("over " + std::to_string(encoded.size() - 1) + " predicted tokens") != std::string::npos);
    CHECK(expected.chunks == static_cast<int64_t>((encoded.size() - 2) / 32 + 1));
    std::filesystem::remove(path);
}

TEST_CASE("gpt2 refuses bad command lines and checkpoints with a message", "[gpt2_program]") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--prompt hi", "--model DIR is required"},
        {"--model " + kModel, "give one of --prompt TEXT, --eval TEXTFILE and --finetune TEXTFILE"},
        {"--model " + kModel + " --prompt hi --eval x.txt", "give one of"},
        {"--model " + kModel + " --prompt hi --out somewhere", "--out is for --finetune"},
        {"--model " + kModel + " --prompt hi --top-p 0", "--top-p"},
        {"--model " + kModel + " --prompt hi --top-k 0", "--top-k"},
        {"--model " + kModel + " --prompt hi --temperature 0", "--temperature"},
        {"--model " + kModel + " --prompt hi --frobnicate", "unknown option --frobnicate"},
        {"--model /nonexistent/dir --prompt hi", "[from_pretrained]"},
        {"--model " + kModel + " --eval /nonexistent.txt", "cannot read"},
    };
    for (const auto& [args, message] : cases) {
        INFO(args);
        CommandResult r = run_command(kGPT2 + " " + args + " 2>&1");
        CHECK(r.status == 2);
        CHECK(r.out.find(message) != std::string::npos);
    }
    // An empty prompt starts from <|endoftext|>, as GPT-2's documents do.
    CommandResult r = run_command(kGPT2 + " --model " + kModel + " --prompt '' --max-new-tokens 3");
    CHECK(r.status == 0);
    CHECK(r.out.find("3 tokens in") != std::string::npos);
}

TEST_CASE("gpt2 --finetune trains, and writes the model only when the val loss improves", "[gpt2_program][heavy]") {
    const std::string text_path = scratch_path("finetune.txt"), out = scratch_path("finetuned");
    {
        std::ifstream in(std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt", std::ios::binary);
        std::string text(20000, '\0');
        in.read(text.data(), static_cast<std::streamsize>(text.size()));
        std::ofstream(text_path, std::ios::binary) << text;
    }
    std::filesystem::remove_all(out);
    const std::string command = kGPT2 + " --model " + kModel + " --finetune " + text_path + " --out " + out +
                                " --iters 6 --eval-interval 2 --eval-iters 2 --batch-size 2 --grad-accum 2 "
                                "--block-size 16 --lr 3e-3 --seed 7";
    CommandResult r = run_command(command);
    REQUIRE(r.status == 0);
    // "step N: train loss X, val loss Y[; saved to DIR]" at steps 0, 2, 4, 6:
    // saved exactly when Y is below every earlier val loss (never at step 0,
    // which would only copy the model read).
    std::istringstream lines(r.out);
    std::string line;
    double best = INFINITY;
    int steps = 0, saves = 0, iters = 0;
    while (std::getline(lines, line)) {
        if (line.rfind("iter ", 0) == 0) ++iters;
        if (line.rfind("step ", 0) != 0) continue;
        INFO(line);
        const int step = std::stoi(line.substr(5));
        CHECK(step == 2 * steps++);
        const double val = std::stod(line.substr(line.find("val loss ") + 9));
        const bool saved = line.find("; saved to " + out) != std::string::npos;
        CHECK(saved == (step > 0 && val < best));
        saves += saved;
        best = std::min(best, val);
    }
    CHECK(steps == 4);
    CHECK(iters == 6);
    REQUIRE(saves > 0); // the loss does fall at this learning rate
    CHECK(r.out.find(" for training (the first 90% of the characters) and ") != std::string::npos);
    // What it wrote is a checkpoint in the layout it read, with new weights.
    nn::fast::Layout layout;
    auto tuned = nn::fast::from_pretrained(out, 0.0, &layout);
    CHECK(layout == nn::fast::Layout::huggingface);
    auto original = nn::fast::from_pretrained(kModel);
    CHECK_FALSE(allclose(tuned->ln_f->weight, original->ln_f->weight));

    // Never over a checkpoint without --overwrite; the model's vocabulary must hold the tokenizer's.
    CommandResult again = run_command(command + " 2>&1");
    CHECK(again.status == 2);
    CHECK(again.out.find("already holds a checkpoint") != std::string::npos);
    CHECK(run_command(command + " --overwrite").status == 0);
    CommandResult small = run_command(kGPT2 + " --model " + std::string(EMBER_FIXTURE_DIR) +
                                      "/pretrained_nanogpt --eval " + text_path + " 2>&1");
    CHECK(small.status == 2);
    CHECK(small.out.find("the tokenizer has 50257 tokens, more than the model's 65") != std::string::npos);
    CommandResult long_block = run_command(command + " --overwrite --block-size 33 2>&1");
    CHECK(long_block.status == 2);
    CHECK(long_block.out.find("--block-size 33 is more than the model's n_positions (32)") != std::string::npos);
    CommandResult long_name = run_command(kGPT2 + " --model " + kModel + " --finetune " + text_path + " --out " +
                                          std::string(5000, 'x') + " 2>&1");
    CHECK(long_name.status == 2); // the system's refusal, as a message
    CHECK(long_name.out.find("gpt2: ") != std::string::npos);
    CommandResult no_out = run_command(kGPT2 + " --model " + kModel + " --finetune " + text_path + " 2>&1");
    CHECK(no_out.status == 2);
    CHECK(no_out.out.find("--finetune needs --out") != std::string::npos);
    std::filesystem::remove(text_path);
    std::filesystem::remove_all(out);
}

TEST_CASE("gpt2 --tokenizer chars:FILE samples a character model (nanoGPT's shakespeare_char)", "[gpt2_program]") {
    const std::string model = std::string(EMBER_FIXTURE_DIR) + "/pretrained_nanogpt";
    const std::string chars = " --tokenizer chars:" + std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt";
    CommandResult r = run_command(kGPT2 + " --model " + model + chars + " --prompt 'ROMEO:' --max-new-tokens 30");
    REQUIRE(r.status == 0);
    CHECK(r.out.find("(nanogpt layout)") != std::string::npos);
    const size_t text_start = r.out.find('\n') + 1, rule = r.out.find("\n---\n");
    REQUIRE(rule != std::string::npos);
    const std::string text = r.out.substr(text_start, rule - text_start);
    CHECK(text.size() == 6 + 30); // one character per token, all ASCII
    CHECK(text.rfind("ROMEO:", 0) == 0);
    // A tokenizer with fewer tokens than the model's rows: only its own are drawn.
    const std::string ab = scratch_path("ab.txt");
    std::ofstream(ab, std::ios::binary) << "ab\n";
    CommandResult few =
        run_command(kGPT2 + " --model " + model + " --tokenizer chars:" + ab + " --prompt ab --max-new-tokens 50");
    std::filesystem::remove(ab);
    REQUIRE(few.status == 0);
    const size_t first = few.out.find('\n') + 1;
    const std::string drawn = few.out.substr(first, few.out.find("\n---\n") - first);
    CHECK(drawn.size() == 2 + 50);
    CHECK(drawn.find_first_not_of("ab\n") == std::string::npos);
    CommandResult bad = run_command(kGPT2 + " --model " + model + chars + " --prompt 'caf\xc3\xa9' 2>&1");
    CHECK(bad.status == 2);
    CHECK(bad.out.find("is not in the vocabulary") != std::string::npos);
}
