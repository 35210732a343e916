// GPT-2's tokenizer: see gpt2_tokenizer.h. First the pieces the split
// pattern cuts (on Unicode's classes), then SHA-256 for checking the files,
// then loading OpenAI's two files and encoding with them.
#include "nn/gpt2_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nn/json.h"
#include "nn/safetensors.h"
#include "nn/unicode_tables.h"

namespace ember::tokenizer {

// ---- the split pattern ------------------------------------------------------------------------

namespace {

template <size_t N>
bool in(const unicode::CodeRange (&table)[N], uint32_t c) {
    // The last range that starts at or before c.
    const auto* it =
        std::upper_bound(table, table + N, c, [](uint32_t v, const unicode::CodeRange& r) { return v < r.first; });
    return it != table && c <= (it - 1)->last;
}

enum class Kind { Letter, Number, Space, Other };

Kind kind_of(uint32_t c) {
    if (c < 0x80) { // ASCII, the common case, without a search
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return Kind::Letter;
        if (c >= '0' && c <= '9') return Kind::Number;
        if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return Kind::Space;
        return Kind::Other;
    }
    if (in(unicode::kLetters, c)) return Kind::Letter;
    if (in(unicode::kNumbers, c)) return Kind::Number;
    if (in(unicode::kWhiteSpace, c)) return Kind::Space;
    return Kind::Other;
}

// The code points of text, each with the byte offset where it starts (and
// one more offset, the text's end). ValueError at the first invalid sequence.
void decode_utf8(const std::string& text, std::vector<uint32_t>& code, std::vector<size_t>& start) {
    const size_t n = text.size();
    auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    size_t i = 0;
    while (i < n) {
        const unsigned char b = byte(i);
        int length = 0;
        uint32_t c = 0, min = 0;
        if (b < 0x80) length = 1, c = b;
        else if ((b & 0xE0) == 0xC0) length = 2, c = b & 0x1F, min = 0x80;
        else if ((b & 0xF0) == 0xE0) length = 3, c = b & 0x0F, min = 0x800;
        else if ((b & 0xF8) == 0xF0) length = 4, c = b & 0x07, min = 0x10000;
        bool ok = length > 0 && i + static_cast<size_t>(length) <= n;
        for (int k = 1; ok && k < length; ++k) {
            ok = (byte(i + k) & 0xC0) == 0x80;
            c = (c << 6) | (byte(i + k) & 0x3F);
        }
        // No overlong form, no surrogate, nothing past U+10FFFF.
        if (!ok || c < min || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", b);
            fail<ValueError>("split_gpt2", "the text is not valid UTF-8 at byte ", i, " (", hex, ")");
        }
        code.push_back(c);
        start.push_back(i);
        i += static_cast<size_t>(length);
    }
    start.push_back(n);
}

} // namespace

std::vector<std::string> split_gpt2(const std::string& text) {
    std::vector<uint32_t> code;
    std::vector<size_t> start;
    decode_utf8(text, code, start);
    const size_t n = code.size();
    std::vector<Kind> kind(n);
    for (size_t i = 0; i < n; ++i) kind[i] = kind_of(code[i]);
    auto run_end = [&](size_t i, Kind k) { // the end of the run of kind k starting at i
        while (i < n && kind[i] == k) ++i;
        return i;
    };

    std::vector<std::string> pieces;
    size_t i = 0;
    while (i < n) {
        size_t end = i + 1;
        // The alternatives in the pattern's order; the first that matches here wins.
        auto at = [&](size_t k, char c) { return k < n && code[k] == static_cast<uint32_t>(c); };
        if (at(i, '\'') && (at(i + 1, 's') || at(i + 1, 't') || at(i + 1, 'm') || at(i + 1, 'd'))) {
            end = i + 2; // 's 't 'm 'd
        } else if (at(i, '\'') && ((at(i + 1, 'r') && at(i + 2, 'e')) || (at(i + 1, 'v') && at(i + 2, 'e')) ||
                                   (at(i + 1, 'l') && at(i + 2, 'l')))) {
            end = i + 3; // 're 've 'll
        } else {
            // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": one optional space (U+0020
            // only), then a run of one kind.
            const size_t first = at(i, ' ') ? i + 1 : i;
            if (first < n && kind[first] != Kind::Space) {
                end = run_end(first, kind[first]);
            } else {
                // White space: "\s+(?!\S)" takes the run but, before a non-space,
                // leaves its last character for what follows (" word" takes it);
                // a single one before a non-space falls to "\s+" and stands alone.
                const size_t run = run_end(i, Kind::Space);
                end = (run < n && run - i >= 2) ? run - 1 : run;
            }
        }
        pieces.push_back(text.substr(start[i], start[end] - start[i]));
        i = end;
    }
    return pieces;
}

// ---- SHA-256 ----------------------------------------------------------------------------------

std::string sha256_hex(const std::string& bytes) {
    static constexpr uint32_t k[64] = {0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
                                       0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
                                       0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
                                       0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
                                       0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
                                       0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
                                       0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
                                       0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
                                       0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
                                       0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
                                       0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    auto rotr = [](uint32_t x, int r) { return (x >> r) | (x << (32 - r)); };
    // The message, a 1 bit, zeros, and its length in bits: a multiple of 64 bytes.
    std::string m = bytes;
    m += static_cast<char>(0x80);
    while (m.size() % 64 != 56) m += '\0';
    const uint64_t bits = static_cast<uint64_t>(bytes.size()) * 8;
    for (int s = 56; s >= 0; s -= 8) m += static_cast<char>((bits >> s) & 0xFF);
    for (size_t block = 0; block < m.size(); block += 64) {
        uint32_t w[64];
        for (int t = 0; t < 16; ++t) {
            w[t] = 0;
            for (int b = 0; b < 4; ++b) w[t] = (w[t] << 8) | static_cast<unsigned char>(m[block + 4 * t + b]);
        }
        for (int t = 16; t < 64; ++t) {
            const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
            const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
            w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int t = 0; t < 64; ++t) {
            const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[t] + w[t];
            const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
    }
    std::string hex;
    for (uint32_t v : h) {
        char buf[9];
        std::snprintf(buf, sizeof buf, "%08x", v);
        hex += buf;
    }
    return hex;
}

// ---- OpenAI's files -----------------------------------------------------------------------------

namespace {

// GPT-2's files write each byte as a printable character: the bytes that
// print (! to ~, ¡ to ¬, ® to ÿ) as themselves, the other 68 as U+0100,
// U+0101, ... in byte order (OpenAI's bytes_to_unicode). Here: code point -> byte.
std::unordered_map<uint32_t, unsigned char> byte_of_character() {
    std::unordered_map<uint32_t, unsigned char> byte_of;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool prints = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_of[prints ? static_cast<uint32_t>(b) : next++] = static_cast<unsigned char>(b);
    }
    return byte_of;
}

std::string read_checked(const std::string& path, const char* sha256) {
    std::ifstream in(path, std::ios::binary);
    if (!in || std::filesystem::is_directory(path))
        fail<TokenizerError>("GPT2Tokenizer::load", "cannot read '", path, "' as a file");
    std::stringstream s;
    s << in.rdbuf();
    const std::string bytes = s.str();
    const std::string hash = sha256_hex(bytes);
    if (hash != sha256)
        fail<TokenizerError>("GPT2Tokenizer::load", "'", path, "' is not OpenAI's file: its sha256 is ", hash,
                             ", GPT-2's is ", sha256, " (", bytes.size(), " bytes; see data/README.md)");
    return bytes;
}

} // namespace

GPT2Tokenizer GPT2Tokenizer::load(const std::string& dir) {
    const std::string encoder_path = dir + "/encoder.json", vocab_path = dir + "/vocab.bpe";
    const std::string encoder_text = read_checked(encoder_path, kEncoderSha256);
    const std::string vocab_text = read_checked(vocab_path, kVocabSha256);
    const auto byte_of = byte_of_character();

    // encoder.json: {"token text": id, ...}; each text's characters are bytes.
    internal::Json encoder;
    try {
        encoder = internal::parse_json(encoder_text, encoder_path);
    } catch (const nn::SafetensorsError& e) {
        fail<TokenizerError>("GPT2Tokenizer::load", e.what());
    }
    GPT2Tokenizer t;
    t.token_bytes_.resize(encoder.keys.size());
    std::unordered_map<std::string, int> id_of; // token text (as in the files) -> id
    for (size_t i = 0; i < encoder.keys.size(); ++i) {
        const int64_t id = encoder.values[i].integer;
        if (encoder.values[i].kind != internal::Json::Kind::Integer || id < 0 ||
            id >= static_cast<int64_t>(encoder.keys.size()))
            fail<TokenizerError>("GPT2Tokenizer::load", encoder_path, ": the id of \"", encoder.keys[i],
                                 "\" is not in 0..", encoder.keys.size() - 1);
        std::vector<uint32_t> code;
        std::vector<size_t> start;
        decode_utf8(encoder.keys[i], code, start);
        std::string bytes;
        for (uint32_t c : code) bytes += static_cast<char>(byte_of.at(c));
        t.token_bytes_[static_cast<size_t>(id)] = bytes;
        id_of[encoder.keys[i]] = static_cast<int>(id);
        if (bytes.size() == 1) t.byte_id_[static_cast<unsigned char>(bytes[0])] = static_cast<int>(id);
    }
    // vocab.bpe: "#version: 0.2", then "first second" a line, by rank.
    std::istringstream lines(vocab_text);
    std::string line;
    std::getline(lines, line); // the version
    int rank = 0;
    while (std::getline(lines, line)) {
        if (line.empty()) continue;
        const size_t space = line.find(' ');
        const std::string first = line.substr(0, space), second = line.substr(space + 1);
        const int a = id_of.at(first), b = id_of.at(second), merged = id_of.at(first + second);
        t.merge_[pair_key({a, b})] = {rank++, merged};
    }
    return t;
}

std::vector<int> GPT2Tokenizer::encode_piece(const std::string& piece) const {
    std::vector<int> ids;
    for (unsigned char c : piece) ids.push_back(byte_id_[c]);
    // The pair of lowest rank, merged everywhere, until no pair has a merge.
    while (ids.size() >= 2) {
        Pair best{}, best_merge{-1, -1}; // the pair, and its (rank, merged id)
        for (size_t i = 0; i + 1 < ids.size(); ++i) {
            const auto it = merge_.find(pair_key({ids[i], ids[i + 1]}));
            if (it != merge_.end() && (best_merge.first < 0 || it->second.first < best_merge.first))
                best = {ids[i], ids[i + 1]}, best_merge = it->second;
        }
        if (best_merge.first < 0) break;
        ids = merge(ids, best, best_merge.second);
    }
    return ids;
}

std::vector<int> GPT2Tokenizer::encode(const std::string& text) const {
    std::vector<int> ids;
    for (const std::string& piece : split_gpt2(text)) {
        const std::vector<int> piece_ids = encode_piece(piece);
        ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    }
    return ids;
}

const std::string& GPT2Tokenizer::token_bytes(int id) const {
    if (id < 0 || id >= vocab_size())
        fail<IndexError>("GPT2Tokenizer", "id ", id, " is outside the vocabulary of ", vocab_size(), " tokens");
    return token_bytes_[static_cast<size_t>(id)];
}

std::string GPT2Tokenizer::decode_bytes(const std::vector<int>& ids) const {
    std::string bytes;
    for (int id : ids) bytes += token_bytes(id);
    return bytes;
}

std::string GPT2Tokenizer::decode(const std::vector<int>& ids) const { return utf8_replace_invalid(decode_bytes(ids)); }

} // namespace ember::tokenizer
