// One of ember's three tokenizers, chosen by name on a command line:
// "gpt2" is GPT-2's own (nn/gpt2_tokenizer.h, its files in data/gpt2), any
// other name a .model file that `tokenize train` wrote (a RegexTokenizer's
// if its second line holds a split pattern, else a BasicTokenizer's).
// Used by tokenize and gpt2.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ember.h>

struct AnyTokenizer {
    std::function<std::vector<int>(const std::string&)> encode;
    std::function<std::string(const std::vector<int>&)> decode;       // invalid UTF-8 replaced
    std::function<std::string(const std::vector<int>&)> decode_bytes; // the raw bytes
    int vocab_size = 0;
    bool is_gpt2 = false;
};

template <typename T>
AnyTokenizer wrap_tokenizer(std::shared_ptr<T> t) {
    return {[t](const std::string& s) { return t->encode(s); }, [t](const std::vector<int>& i) { return t->decode(i); },
            [t](const std::vector<int>& i) { return t->decode_bytes(i); }, t->vocab_size(), false};
}

// GPT-2's files: data/gpt2 under the folder the program runs in (the
// source tree, as the docs run it), else the source tree it was built from.
inline AnyTokenizer open_tokenizer(const std::string& name) {
    using namespace ember::tokenizer;
    if (name != "gpt2") {
        std::ifstream in(name, std::ios::binary);
        std::string version, pattern;
        std::getline(in, version);
        std::getline(in, pattern);
        if (!pattern.empty() && pattern != "\r")
            return wrap_tokenizer(std::make_shared<RegexTokenizer>(RegexTokenizer::load(name)));
        return wrap_tokenizer(std::make_shared<BasicTokenizer>(BasicTokenizer::load(name)));
    }
    const std::string dir = std::filesystem::exists("data/gpt2/encoder.json") ? "data/gpt2" : EMBER_DATA_DIR "/gpt2";
    AnyTokenizer t = wrap_tokenizer(std::make_shared<GPT2Tokenizer>(GPT2Tokenizer::load(dir)));
    t.is_gpt2 = true;
    return t;
}
