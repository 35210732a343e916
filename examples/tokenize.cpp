// tokenize: byte-level BPE from the command line (nn/tokenizer.h), as the
// lecture "Let's build the GPT Tokenizer" builds it with minbpe:
//
//   build/examples/tokenize train --vocab-size 512 data/tinyshakespeare.txt
//   build/examples/tokenize encode --tokenizer tokenizer.model FILE
//   build/examples/tokenize decode --tokenizer tokenizer.model IDS_FILE
//   build/examples/tokenize encode --tokenizer gpt2 FILE
//
// train prints each merge as it learns it and writes PREFIX.model and
// PREFIX.vocab (minbpe's files); encode prints the ids of a text separated
// by spaces; decode prints the text of such ids. --tokenizer gpt2 is
// GPT-2's own tokenizer (nn/gpt2_tokenizer.h, data/gpt2). Bad input exits with
// status 2 and a message. Tests: tests/test_tokenizer.cpp; docs: docs/tokenization.md.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include <ember.h>

#include "flags.h"
#include "open_tokenizer.h"

using namespace ember;
using flags::UsageError;

namespace {

const char* kUsage = R"(usage: tokenize COMMAND [options] FILE

Byte-level BPE, as minbpe builds it: text is UTF-8 bytes (ids 0-255), and
training merges the most frequent adjacent pair into a new id, again and again.

commands
  train --vocab-size N [--regex] [--out PREFIX] [--quiet] TEXTFILE
        learn N - 256 merges from TEXTFILE, printing each one as it is made
        ("merge 1/256: (101, 32) -> 256 (b'e ') had 27643 occurrences"), then
        write PREFIX.model (the merges; minbpe's format, which minbpe can load)
        and PREFIX.vocab (every token, for reading). PREFIX defaults to
        "tokenizer". --regex first cuts the text with GPT-2's split pattern
        and merges inside the pieces only (minbpe's RegexTokenizer). --quiet
        prints only the summary.
  encode --tokenizer MODEL|gpt2 TEXTFILE
        print the ids of TEXTFILE's text, separated by spaces; gpt2 is GPT-2's
        own tokenizer (its 50,257 tokens, from data/gpt2)
  decode --tokenizer MODEL|gpt2 IDSFILE
        print the text of the ids in IDSFILE (separated by spaces or lines);
        bytes that are not valid UTF-8 become U+FFFD, as Python's
        bytes.decode("utf-8", errors="replace")
  --help
)";

template <typename Tokenizer>
int train(const std::string& path, int vocab_size, const std::string& prefix, bool quiet) {
    const std::string text = flags::read_file(path);
    Tokenizer t;
    const auto start = std::chrono::steady_clock::now();
    t.train(text, vocab_size, [quiet](const tokenizer::MergeStep& s) {
        if (!quiet) std::cout << tokenizer::describe(s) << "\n";
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const size_t tokens = t.encode(text).size();
    std::cout << flags::format("learned %zu merges in %.1f s: %zu bytes of text are %zu tokens (%.2fx)\n",
                               t.merges().size(), seconds, text.size(), tokens,
                               tokens ? static_cast<double>(text.size()) / static_cast<double>(tokens) : 0.0);
    t.save(prefix);
    std::cout << "wrote " << prefix << ".model, " << prefix << ".vocab\n";
    return 0;
}

int run(int argc, char** argv) {
    std::vector<std::string> words;
    const auto given =
        flags::parse(argc, argv, {"--vocab-size", "--out", "--tokenizer"}, {"--help", "--quiet", "--regex"}, &words);
    int64_t vocab_size = -1;
    std::string prefix = "tokenizer", model;
    bool quiet = false, regex = false;
    for (const flags::Flag& f : given) {
        if (f.name == "--help") {
            std::cout << kUsage;
            return 0;
        }
        if (f.name == "--vocab-size") vocab_size = flags::integer(f.name, f.value, 256, 1 << 20);
        else if (f.name == "--out") prefix = f.value;
        else if (f.name == "--tokenizer") model = f.value;
        else if (f.name == "--quiet") quiet = true;
        else if (f.name == "--regex") regex = true;
    }
    if (words.size() != 2) throw UsageError("expected a command (train, encode or decode) and one file");
    const std::string& command = words[0];
    const std::string& file = words[1];
    if (command == "train") {
        if (vocab_size < 0) throw UsageError("train needs --vocab-size N (256 or more)");
        if (prefix.empty()) throw UsageError("--out needs a path prefix, got an empty string");
        return regex ? train<tokenizer::RegexTokenizer>(file, static_cast<int>(vocab_size), prefix, quiet)
                     : train<tokenizer::BasicTokenizer>(file, static_cast<int>(vocab_size), prefix, quiet);
    }
    if (command != "encode" && command != "decode")
        throw UsageError("unknown command \"" + command + "\" (train, encode or decode)");
    if (model.empty())
        throw UsageError(command + " needs --tokenizer MODEL (a .model file that train wrote) or --tokenizer gpt2");
    const AnyTokenizer t = open_tokenizer(model);
    const std::string input = flags::read_file(file);
    if (command == "encode") {
        const std::vector<int> ids = t.encode(input);
        for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
        std::cout << "\n";
        return 0;
    }
    std::istringstream numbers(input);
    std::vector<int> ids;
    std::string word;
    while (numbers >> word) ids.push_back(static_cast<int>(flags::integer("an id in " + file, word, 0, INT32_MAX)));
    std::cout << t.decode(ids); // IndexError for an id the tokenizer does not have
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "tokenize: %s\nrun tokenize --help for the commands\n", e.what());
    } catch (const std::invalid_argument& e) { // a file it cannot read
        std::fprintf(stderr, "tokenize: %s\n", e.what());
    } catch (const ember::Error& e) { // a bad model file, an id outside the vocabulary, a file it cannot write
        std::fprintf(stderr, "tokenize: %s\n", e.what());
    }
    return 2;
}
