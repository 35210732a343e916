// GPT-2's own tokenizer: byte-level BPE (tokenizer.h) with GPT-2's split
// pattern and OpenAI's 50,000 merges. Encoding first cuts the text into
// pieces with the pattern
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (contractions, words with at most one leading space, numbers, runs of
// other symbols, runs of white space), then merges inside each piece only:
// so " the" is one token wherever it stands, and no token spans a word and
// the punctuation after it. The vocabulary comes from OpenAI's two files,
// encoder.json and vocab.bpe (data/gpt2/, checked by their sha256 when
// loaded). Encoding equals OpenAI's encoder.py (Python's regex module), and
// the npm package gpt-3-encoder's but for U+0085 and U+FEFF, which
// JavaScript's \s counts the other way; characters that Unicode assigned
// after version 15.0 are classed as symbols. The text "<|endoftext|>" is
// encoded as text, and its special id is kEndOfText. Tests: tests/test_gpt2_tokenizer.cpp;
// docs: docs/tokenization.md.
#pragma once

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/tokenizer.h"

namespace ember::tokenizer {

// The pieces of `text` (UTF-8) under GPT-2's split pattern, in order; they
// concatenate to the text. Letters, numbers and white space are Unicode's
// (nn/unicode_tables.h, Unicode 15.0). ValueError naming the byte offset if
// the text is not valid UTF-8.
std::vector<std::string> split_gpt2(const std::string& text);

// The SHA-256 of `bytes`, as 64 lowercase hex digits (FIPS 180-4).
std::string sha256_hex(const std::string& bytes);

class GPT2Tokenizer {
public:
    static constexpr int kEndOfText = 50256; // <|endoftext|>
    static constexpr const char* kEncoderSha256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783";
    static constexpr const char* kVocabSha256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5";

    // DIR/encoder.json and DIR/vocab.bpe. TokenizerError naming the file if
    // one cannot be read, its sha256 is not the published one, or (for a
    // file with the right hash, which cannot happen) it does not parse.
    static GPT2Tokenizer load(const std::string& dir);

    // The ids of text (valid UTF-8, else ValueError): its pieces, each one's
    // bytes, then GPT-2's merges inside each piece, lowest rank first.
    std::vector<int> encode(const std::string& text) const;
    // The text of ids, broken UTF-8 replaced as Python's errors="replace"
    // does; decode_bytes gives the bytes. IndexError for an unknown id.
    std::string decode(const std::vector<int>& ids) const;
    std::string decode_bytes(const std::vector<int>& ids) const;

    int vocab_size() const { return static_cast<int>(token_bytes_.size()); }
    const std::string& token_bytes(int id) const;

private:
    std::vector<int> encode_piece(const std::string& piece) const;
    std::vector<std::string> token_bytes_;     // id -> bytes
    std::array<int, 256> byte_id_{};           // byte -> the id of its one-byte token
    std::unordered_map<uint64_t, Pair> merge_; // (id, id) -> (rank, merged id)
};

} // namespace ember::tokenizer
