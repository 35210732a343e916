// The gpt2 program (examples/gpt2.cpp) run as a learner runs it, on the
// PyTorch twin's GPT-2 checkpoint (tests/fixtures/pretrained_hf): it
// samples PyTorch's tokens for the same seed, with and without the cache,
// prints the text_loss of a file, and refuses bad command lines with
// status 2 and a message.
#include <catch2/catch.hpp>

#include <fstream>

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

} // namespace

TEST_CASE("gpt2 --prompt samples PyTorch's tokens for the same seed, streamed", "[gpt2_program]") {
    Fixtures f("pretrained");
    Tensor generated = f.tensor("gpt2.generated"); // the prompt's 4 ids, then 12 sampled by PyTorch
    std::vector<int> ids(generated.data_ptr<int64_t>(), generated.data_ptr<int64_t>() + generated.numel());
    REQUIRE(gpt2_tokenizer().encode("Hello, my dog") == std::vector<int>(ids.begin(), ids.begin() + 4));
    const std::string expected = gpt2_tokenizer().decode(ids);
    for (const std::string cache : {"", " --no-cache"}) {
        INFO(cache);
        CommandResult r = run_command(kGPT2 + " --model " + kModel +
                                      " --prompt 'Hello, my dog' --max-new-tokens 12 --seed 42 --temperature 0.8 "
                                      "--top-k 200" +
                                      cache);
        REQUIRE(r.status == 0);
        // a line about the model, the text, then the speed after "---"
        const size_t text_start = r.out.find('\n') + 1;
        CHECK(r.out.substr(0, text_start).find("huggingface layout") != std::string::npos);
        const size_t rule = r.out.find("\n---\n");
        REQUIRE(rule != std::string::npos);
        CHECK(r.out.substr(text_start, rule - text_start) == expected);
        CHECK(r.out.find("12 tokens in", rule) != std::string::npos);
        CHECK(r.out.find("tokens/s", rule) != std::string::npos);
    }
}

TEST_CASE("gpt2 --eval prints text_loss over the file's tokens", "[gpt2_program]") {
    const std::string text =
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\n"
        "You are all resolved rather to die than to famish?\n\nAll:\nResolved. resolved.\n";
    const std::string path = "ember_test_gpt2_eval.txt";
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
}

TEST_CASE("gpt2 refuses bad command lines and checkpoints with a message", "[gpt2_program]") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--prompt hi", "--model DIR is required"},
        {"--model " + kModel, "give one of --prompt TEXT and --eval TEXTFILE"},
        {"--model " + kModel + " --prompt hi --eval x.txt", "give one of"},
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
