// Byte-level BPE, as Karpathy's minbpe teaches it (the lecture "Let's build
// the GPT Tokenizer"): text is UTF-8 bytes, ids 0..255; training repeatedly
// finds the most frequent adjacent pair of ids and gives it a new id (256,
// 257, ...); encoding applies the learned merges in the order they were
// learned; decoding concatenates each id's bytes. BasicTokenizer is minbpe's
// BasicTokenizer: no split pattern, no special tokens; RegexTokenizer adds
// GPT-2's split pattern and special tokens. Their files are minbpe's:
// NAME.model (read back by minbpe's load, and by ember's) and NAME.vocab.
// Tests: tests/test_tokenizer.cpp; docs: docs/tokenization.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor/error.h"

namespace ember::tokenizer {

// A file that cannot be read or written, or is not a tokenizer's model file.
class TokenizerError : public Error {
public:
    using Error::Error;
};

using Pair = std::pair<int, int>;

// A pair of ids as one 64-bit key, for hash maps of merges.
inline uint64_t pair_key(Pair p) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(p.first)) << 32) | static_cast<uint32_t>(p.second);
}

// How often each adjacent pair occurs in ids, each with the position of its
// first occurrence (minbpe's get_stats; a dict there, whose order of
// insertion is that of first occurrence, which breaks ties in training).
struct PairCount {
    Pair pair;
    int64_t count;
    int64_t first; // position of the first occurrence
};
std::vector<PairCount> count_pairs(const std::vector<int>& ids);

// ids with each occurrence of `pair`, left to right and not overlapping,
// replaced by `id` (minbpe's merge): merge({97, 97, 97}, {97, 97}, 256) is {256, 97}.
std::vector<int> merge(const std::vector<int>& ids, Pair pair, int id);

// What training prints for each merge, as minbpe's verbose training does:
// "merge 1/3: (97, 97) -> 256 (b'aa') had 4 occurrences".
struct MergeStep {
    int index;         // 0-based: this merge made id 256 + index
    int of;            // merges in all
    Pair pair;         // the pair merged
    int id;            // the new id
    int64_t count;     // how often the pair occurred when it was chosen
    std::string bytes; // the new token's bytes
};
std::string describe(const MergeStep& step);

// `bytes` as Python prints a bytes object: b'e ', b'\n', b"'s", b'\xe2\x80'.
std::string bytes_repr(const std::string& bytes);

// UTF-8 bytes decoded as Python's bytes.decode("utf-8", errors="replace"):
// each maximal invalid subsequence becomes U+FFFD. Returns UTF-8.
std::string utf8_replace_invalid(const std::string& bytes);

class BasicTokenizer {
public:
    // The 256 byte tokens and no merges.
    BasicTokenizer();

    // Learns vocab_size - 256 merges from text's bytes, replacing any it had.
    // Each merge takes the pair that occurs most often in the text as merged
    // so far (ties: the pair seen first), even a pair that occurs once, as
    // minbpe's train does; training stops early, with fewer merges, only when
    // the text has a single id left. `on_merge` (if given) sees each merge.
    // ValueError if vocab_size < 256.
    void train(const std::string& text, int vocab_size, const std::function<void(const MergeStep&)>& on_merge = {});

    // The ids of text: its bytes, then the merges applied in the order they
    // were learned (the lowest new id first, wherever it occurs).
    std::vector<int> encode(const std::string& text) const;

    // The text of ids: their bytes, as UTF-8 with invalid sequences replaced
    // (utf8_replace_invalid). IndexError for an id outside the vocabulary.
    std::string decode(const std::vector<int>& ids) const;
    // Their bytes, as they are.
    std::string decode_bytes(const std::vector<int>& ids) const;

    // prefix.model and prefix.vocab, in minbpe's formats; the model file is
    // written whole or not at all. TokenizerError if a file cannot be written.
    void save(const std::string& prefix) const;
    // A tokenizer from a .model file written by save() or by minbpe's
    // BasicTokenizer.save. TokenizerError naming the file and the line for
    // anything else (another format, a split pattern or special tokens,
    // which BasicTokenizer lacks, an id not yet defined, a line cut short).
    static BasicTokenizer load(const std::string& model_file);

    int vocab_size() const { return static_cast<int>(vocab_.size()); }
    // merges()[i] is the pair merged into id 256 + i.
    const std::vector<Pair>& merges() const { return merges_; }
    // The bytes of one token. IndexError outside the vocabulary.
    const std::string& token_bytes(int id) const;

protected:
    // minbpe's training loop over chunks of byte ids, chunk i counted
    // weights[i] times; pairs never span two chunks. `op` names the caller.
    void learn(std::vector<std::vector<int>> chunks, const std::vector<int64_t>& weights, int vocab_size,
               const std::function<void(const MergeStep&)>& on_merge, const char* op);
    // The ids of one chunk of bytes: the merges, earliest learned first.
    std::vector<int> encode_chunk(const std::string& bytes) const;
    // A .model file's text (version, split pattern, special tokens, merges)
    // and the .vocab listing; reading a .model into `into`, which must hold
    // no merges yet: its pattern and special tokens are returned.
    using Specials = std::vector<std::pair<std::string, int>>;
    std::string model_text(const std::string& pattern, const Specials& specials) const;
    std::string vocab_text() const;
    static std::pair<std::string, Specials> read_model(const std::string& path, const char* op, BasicTokenizer& into);

private:
    void add_merge(Pair pair); // the next id for pair
    std::vector<Pair> merges_;
    std::unordered_map<uint64_t, int> merge_id_; // pair (as a key) -> its id
    std::vector<std::string> vocab_;             // id -> bytes
};

// GPT-2's split pattern as minbpe writes it (GPT2_SPLIT_PATTERN), and as
// OpenAI's encoder writes it: the same pattern (gpt2_tokenizer.h), the one
// RegexTokenizer splits with.
inline constexpr const char* kGPT2Pattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr const char* kGPT2PatternOpenAI =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What encode does with special tokens' text (minbpe's allowed_special):
// refuse it (NoneRaise, minbpe's default), encode it as ordinary text
// (None), or give each its special id (All).
enum class AllowedSpecial { NoneRaise, None, All };

// minbpe's RegexTokenizer with GPT-2's split pattern: the text is first cut
// into pieces (split_gpt2, gpt2_tokenizer.h), and merges are learned and
// applied inside pieces only; special tokens (such as <|endoftext|>) have
// ids of their own, beyond the merges. Its .model file holds the pattern
// and the special tokens; load reads one written by save or by minbpe's
// RegexTokenizer(GPT2_SPLIT_PATTERN).save, and refuses other patterns.
class RegexTokenizer : public BasicTokenizer {
public:
    // Learns vocab_size - 256 merges from the pieces of text, as minbpe's
    // RegexTokenizer.train does (pairs counted within pieces, the most
    // frequent merged; ties: the first seen). Keeps the special tokens.
    // ValueError if vocab_size < 256 or text is not valid UTF-8.
    void train(const std::string& text, int vocab_size, const std::function<void(const MergeStep&)>& on_merge = {});

    // Adds special tokens, each a text and its id. ValueError for an empty or
    // repeated text, a text with white space (minbpe's file splits its lines
    // at spaces), or an id that is negative or taken (below vocab_size(), or
    // another special's).
    void register_special_tokens(const Specials& specials);
    const Specials& special_tokens() const { return specials_; }

    // The ids of text: each piece's merges; special tokens' text as `allowed` says.
    std::vector<int> encode(const std::string& text, AllowedSpecial allowed = AllowedSpecial::NoneRaise) const;
    std::vector<int> encode_ordinary(const std::string& text) const;
    // As BasicTokenizer's, with special ids decoded to their text.
    std::string decode(const std::vector<int>& ids) const;
    std::string decode_bytes(const std::vector<int>& ids) const;

    void save(const std::string& prefix) const;
    static RegexTokenizer load(const std::string& model_file);

private:
    Specials specials_;
};

} // namespace ember::tokenizer
