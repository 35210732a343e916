// Reading and checking a text, vocabulary, split and batches: see data.h.
#include "data.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <vector>

#include "memory.h"
#include "open_tokenizer.h"

namespace train {

using namespace ember;

// ---- reading a text file -----------------------------------------------------------------

std::string read_text_file(const std::string& path, const std::string& flag) {
    const std::string name = flag + " " + path;
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) throw InputError(name + ": cannot read it: " + std::strerror(errno));
    if (S_ISDIR(info.st_mode)) throw InputError(name + " is a directory; give a text file");
    if (!S_ISREG(info.st_mode)) throw InputError(name + " is not a regular file; give a text file");
    // Its size against the memory a run keeps for a text (memory.h: 17
    // bytes per character) before a byte is read.
    const double need = 17.0 * static_cast<double>(info.st_size);
    if (const auto limit = available_memory(); limit && need > limit->bytes)
        throw InputError(name + " is " + ember::human_bytes(static_cast<double>(info.st_size)) +
                         ": training on it needs about " + ember::human_bytes(need) +
                         " (17 bytes per character), but only " + ember::human_bytes(limit->bytes) + " is available (" +
                         limit->source + ")");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(name + ": cannot read it: " + std::strerror(errno));
    // Read in pieces, each checked for a NUL byte as it comes: a binary file
    // (8 GB of zeros) is refused after its first piece, not its last.
    std::string text;
    std::vector<char> piece(1 << 20);
    while (in.read(piece.data(), static_cast<std::streamsize>(piece.size())) || in.gcount() > 0) {
        const size_t n = static_cast<size_t>(in.gcount());
        if (const void* nul = std::memchr(piece.data(), '\0', n))
            throw InputError(
                name + " is not text: it holds a NUL byte at offset " +
                std::to_string(text.size() + static_cast<size_t>(static_cast<const char*>(nul) - piece.data())) +
                " (a binary file?)");
        text.append(piece.data(), n);
    }
    if (in.bad()) throw InputError(name + ": cannot read it: " + std::strerror(errno));
    if (text.empty()) throw InputError(name + " is empty");
    check_text(text, name);
    return text;
}

namespace {

// The length of the UTF-8 sequence that starts at text[i], or 0 if none
// does (a stray continuation byte, an overlong form, a surrogate, a code
// point past U+10FFFF, or a sequence cut short).
size_t utf8_length(const std::string& text, size_t i) {
    auto byte = [&](size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u; };
    auto continuation = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
    const unsigned b = byte(i);
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return continuation(i + 1) ? 2 : 0;
    if (b >= 0xE0 && b <= 0xEF) {
        const unsigned b1 = byte(i + 1);
        if ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 >= 0xA0)) return 0; // overlong, surrogate
        return continuation(i + 1) && continuation(i + 2) ? 3 : 0;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        const unsigned b1 = byte(i + 1);
        if ((b == 0xF0 && b1 < 0x90) || (b == 0xF4 && b1 >= 0x90)) return 0; // overlong, past U+10FFFF
        return continuation(i + 1) && continuation(i + 2) && continuation(i + 3) ? 4 : 0;
    }
    return 0;
}

} // namespace

void check_text(const std::string& bytes, const std::string& name) {
    for (size_t i = 0; i < bytes.size();) {
        if (bytes[i] == '\0')
            throw InputError(name + " is not text: it holds a NUL byte at offset " + std::to_string(i) +
                             " (a binary file?)");
        const size_t n = utf8_length(bytes, i);
        if (n == 0) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(bytes[i])));
            throw InputError(name + " is not UTF-8 text: byte " + hex + " at offset " + std::to_string(i) +
                             " starts no character (convert it to UTF-8 first, e.g. with iconv)");
        }
        i += n;
    }
}

// ---- vocabulary ----------------------------------------------------------------------------

Vocab Vocab::from_text(const std::string& text) {
    std::string chars = text;
    std::sort(chars.begin(), chars.end(),
              [](char a, char b) { return static_cast<unsigned char>(a) < static_cast<unsigned char>(b); });
    chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
    return from_chars(chars);
}

Vocab Vocab::from_chars(std::string chars) {
    Vocab v;
    for (size_t i = 0; i < chars.size(); ++i) {
        int& slot = v.index_[static_cast<unsigned char>(chars[i])];
        if (slot >= 0) throw std::invalid_argument("vocabulary has a repeated character");
        slot = static_cast<int>(i);
        v.tokens_.emplace_back(1, chars[i]);
    }
    return v;
}

std::string Vocab::chars() const {
    std::string out;
    for (const std::string& token : tokens_) out += token;
    return out;
}

namespace {

// The encode of --tokenizer `name`, and every id's bytes.
std::function<std::vector<int>(const std::string&)> open_bpe(const std::string& name,
                                                             std::vector<std::string>* tokens) {
    if (name == "chars" || name.rfind("chars:", 0) == 0)
        throw InputError("--tokenizer " + name + ": train_gpt's characters are the default (no --tokenizer)");
    try {
        AnyTokenizer t = open_tokenizer(name);
        if (tokens) {
            for (int id = 0; id < t.vocab_size; ++id) tokens->push_back(t.decode_bytes({id}));
        }
        return t.encode;
    } catch (const std::exception& e) { // a missing or malformed file (TokenizerError, flags' read errors)
        throw InputError("--tokenizer " + name + ": " + e.what());
    }
}

} // namespace

Vocab Vocab::from_tokenizer(const std::string& name) {
    Vocab v;
    v.tokenizer_ = name;
    v.bpe_encode_ = open_bpe(name, &v.tokens_);
    return v;
}

Vocab Vocab::from_tokens(std::string name, std::vector<std::string> tokens) {
    if (name.empty()) throw std::invalid_argument("a BPE vocabulary needs its tokenizer's name");
    Vocab v;
    v.tokenizer_ = std::move(name);
    v.tokens_ = std::move(tokens);
    return v;
}

std::vector<int64_t> Vocab::encode(const std::string& text) const {
    std::vector<int64_t> ids;
    if (!is_chars()) {
        if (!bpe_encode_) bpe_encode_ = open_bpe(tokenizer_, nullptr);
        for (int id : bpe_encode_(text)) ids.push_back(id);
        return ids;
    }
    ids.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        int id = index_[byte];
        if (id < 0) {
            // A byte of a longer UTF-8 character is named with its character
            // (a lone byte would print as a broken one).
            const size_t n = (byte & 0xE0) == 0xC0 ? 2 : (byte & 0xF0) == 0xE0 ? 3 : (byte & 0xF8) == 0xF0 ? 4 : 1;
            const std::string shown = n > 1 && i + n <= text.size() ? text.substr(i, n) : std::string(1, text[i]);
            throw std::invalid_argument("character " + std::to_string(static_cast<int>(byte)) + " ('" + shown +
                                        (n > 1 ? "', the first of its " + std::to_string(n) + " bytes" : "'") +
                                        ") is not in the vocabulary");
        }
        ids.push_back(id);
    }
    return ids;
}

std::string Vocab::decode(const Tensor& ids) const {
    Tensor flat = ids.contiguous().view({-1});
    const int64_t* p = flat.data_ptr<int64_t>();
    std::string out;
    for (int64_t i = 0; i < flat.numel(); ++i) {
        if (p[i] < 0 || p[i] >= size())
            throw std::invalid_argument("token id " + std::to_string(p[i]) + " is out of range");
        out += tokens_[static_cast<size_t>(p[i])];
    }
    return is_chars() ? out : tokenizer::utf8_replace_invalid(out);
}

std::vector<std::string> Vocab::pieces(const std::vector<int64_t>& ids) const {
    std::vector<std::string> out;
    for (int64_t id : ids) {
        if (id < 0 || id >= size()) throw std::invalid_argument("token id " + std::to_string(id) + " is out of range");
        out.push_back(tokens_[static_cast<size_t>(id)]);
    }
    return out;
}

Splits split_90_10(const Tensor& data) {
    const int64_t n = static_cast<int64_t>(0.9 * static_cast<double>(data.numel())); // Python's int(0.9*len)
    return {data.slice(0, 0, n), data.slice(0, n)};
}

void check_split_lengths(const Splits& data, int64_t block_size, const std::string& name, const std::string& unit) {
    if (data.train.numel() > block_size && data.val.numel() > block_size) return;
    throw InputError(name + " is too short: its training part (90%) has " + std::to_string(data.train.numel()) + " " +
                     unit + " and its validation part (10%) " + std::to_string(data.val.numel()) +
                     "; each must be longer than --block-size " + std::to_string(block_size) +
                     ". Use a longer text or a smaller --block-size");
}

std::pair<Tensor, Tensor> get_batch(const Tensor& data, int64_t batch_size, int64_t block_size) {
    Tensor ix = randint(data.numel() - block_size, {batch_size});
    const int64_t* starts = ix.data_ptr<int64_t>();
    std::vector<Tensor> xs, ys;
    for (int64_t b = 0; b < batch_size; ++b) {
        xs.push_back(data.slice(0, starts[b], starts[b] + block_size));
        ys.push_back(data.slice(0, starts[b] + 1, starts[b] + block_size + 1));
    }
    return {stack(xs), stack(ys)};
}

std::pair<Tensor, Tensor> get_batch_share(const Tensor& data, int64_t batch_size, int64_t block_size) {
    auto [x, y] = get_batch(data, batch_size, block_size);
    const int world = distributed::get_world_size();
    if (world == 1) return {x, y};
    const int64_t share = batch_size / world, first = distributed::get_rank() * share;
    return {x.slice(0, first, first + share).contiguous(), y.slice(0, first, first + share).contiguous()};
}

uint64_t fingerprint(const std::string& text) {
    uint64_t h = 1469598103934665603ull;
    for (char c : text) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return h;
}

} // namespace train
