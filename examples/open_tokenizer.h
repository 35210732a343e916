// A tokenizer chosen by name on a command line: "gpt2" is GPT-2's own
// (nn/gpt2_tokenizer.h, its files in data/gpt2); "chars:FILE" the sorted
// distinct characters of FILE, one token each (gpt.py's and nanoGPT's
// shakespeare_char vocabulary); any other name a .model file that
// `tokenize train` wrote (a RegexTokenizer's if its second line holds a
// split pattern, else a BasicTokenizer's). Used by tokenize and gpt2.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ember.h>

#include "flags.h"

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

// The characters (UTF-8 sequences) of `text`, in order.
inline std::vector<std::string> utf8_characters(const std::string& text) {
    std::vector<std::string> out;
    for (size_t i = 0; i < text.size(); ++i) {
        if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80 && !out.empty()) out.back() += text[i];
        else out.emplace_back(1, text[i]);
    }
    return out;
}

// gpt.py's vocabulary: chars = sorted(list(set(text))), stoi and itos.
struct CharTokenizer {
    std::vector<std::string> itos;
    std::map<std::string, int> stoi;
    explicit CharTokenizer(const std::string& text) {
        for (const std::string& c : utf8_characters(text)) stoi.emplace(c, 0);
        for (auto& [c, id] : stoi) { // sorted by bytes: by code point, as Python sorts str
            id = static_cast<int>(itos.size());
            itos.push_back(c);
        }
    }
    std::vector<int> encode(const std::string& text) const {
        std::vector<int> ids;
        for (const std::string& c : utf8_characters(text)) {
            auto it = stoi.find(c);
            if (it == stoi.end()) throw std::invalid_argument("the character '" + c + "' is not in the vocabulary");
            ids.push_back(it->second);
        }
        return ids;
    }
    std::string decode_bytes(const std::vector<int>& ids) const {
        std::string out;
        for (int id : ids) {
            if (id < 0 || id >= vocab_size())
                throw std::invalid_argument("id " + std::to_string(id) + " is not in the vocabulary");
            out += itos[static_cast<size_t>(id)];
        }
        return out;
    }
    std::string decode(const std::vector<int>& ids) const { return decode_bytes(ids); }
    int vocab_size() const { return static_cast<int>(itos.size()); }
};

// GPT-2's files: data/gpt2 under the folder the program runs in (the
// source tree, as the docs run it), else the source tree it was built from.
inline AnyTokenizer open_tokenizer(const std::string& name) {
    using namespace ember::tokenizer;
    if (name.rfind("chars:", 0) == 0) {
        return wrap_tokenizer(std::make_shared<CharTokenizer>(flags::read_file(name.substr(6))));
    }
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
