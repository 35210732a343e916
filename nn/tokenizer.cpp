// Byte-level BPE: see tokenizer.h. The helpers (count_pairs, merge, the
// printing) first, then BasicTokenizer's train, encode, decode, save and load.
#include "nn/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/tensor/svg_text.h"
#include "nn/gpt2_tokenizer.h"

namespace ember::tokenizer {

std::vector<PairCount> count_pairs(const std::vector<int>& ids) {
    std::vector<PairCount> counts;
    std::unordered_map<uint64_t, size_t> where; // pair -> its entry in counts
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
        const Pair p{ids[i], ids[i + 1]};
        auto [it, is_new] = where.try_emplace(pair_key(p), counts.size());
        if (is_new) counts.push_back({p, 0, static_cast<int64_t>(i)});
        ++counts[it->second].count;
    }
    return counts; // in order of first occurrence
}

std::vector<int> merge(const std::vector<int>& ids, Pair pair, int id) {
    std::vector<int> out;
    out.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i + 1 < ids.size() && ids[i] == pair.first && ids[i + 1] == pair.second) {
            out.push_back(id);
            ++i; // the pair's second id is used up
        } else {
            out.push_back(ids[i]);
        }
    }
    return out;
}

std::string bytes_repr(const std::string& bytes) {
    // Python quotes with ' unless the bytes hold a ' and no ".
    const bool double_quote = bytes.find('\'') != std::string::npos && bytes.find('"') == std::string::npos;
    const char quote = double_quote ? '"' : '\'';
    std::string out = "b";
    out += quote;
    for (unsigned char c : bytes) {
        if (c == '\\' || c == quote) out += '\\', out += static_cast<char>(c);
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
        else {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        }
    }
    return out + quote;
}

std::string describe(const MergeStep& s) {
    return "merge " + std::to_string(s.index + 1) + "/" + std::to_string(s.of) + ": (" + std::to_string(s.pair.first) +
           ", " + std::to_string(s.pair.second) + ") -> " + std::to_string(s.id) + " (" + bytes_repr(s.bytes) +
           ") had " + std::to_string(s.count) + " occurrences";
}

std::string utf8_replace_invalid(const std::string& bytes) {
    static const std::string kReplacement = "\xEF\xBF\xBD"; // U+FFFD
    std::string out;
    const size_t n = bytes.size();
    auto at = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
    size_t i = 0;
    while (i < n) {
        const unsigned char b = at(i);
        // The sequence's length and the range of its second byte (Unicode's
        // table of well-formed UTF-8: no overlong forms, no surrogates, no
        // code point above U+10FFFF); the later bytes are 80..BF.
        int length = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (b < 0x80) length = 1;
        else if (b >= 0xC2 && b <= 0xDF) length = 2;
        else if (b == 0xE0) length = 3, lo = 0xA0;
        else if (b == 0xED) length = 3, hi = 0x9F;
        else if (b >= 0xE1 && b <= 0xEF) length = 3;
        else if (b == 0xF0) length = 4, lo = 0x90;
        else if (b == 0xF4) length = 4, hi = 0x8F;
        else if (b >= 0xF1 && b <= 0xF3) length = 4;
        if (length == 0) { // a byte no sequence starts with
            out += kReplacement;
            ++i;
            continue;
        }
        // How many bytes of the sequence are well formed (the maximal subpart).
        size_t good = 1;
        while (static_cast<int>(good) < length && i + good < n) {
            const unsigned char c = at(i + good);
            const bool ok = good == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
            if (!ok) break;
            ++good;
        }
        if (static_cast<int>(good) == length) out.append(bytes, i, good);
        else out += kReplacement; // cut short: one U+FFFD for the subpart, then go on at the byte that broke it
        i += good;
    }
    return out;
}

// ---- BasicTokenizer -------------------------------------------------------------------------

BasicTokenizer::BasicTokenizer() {
    for (int b = 0; b < 256; ++b) vocab_.push_back(std::string(1, static_cast<char>(b)));
}

void BasicTokenizer::add_merge(Pair pair) {
    const int id = vocab_size();
    merges_.push_back(pair);
    merge_id_[pair_key(pair)] = id;
    vocab_.push_back(vocab_[static_cast<size_t>(pair.first)] + vocab_[static_cast<size_t>(pair.second)]);
}

void BasicTokenizer::learn(std::vector<std::vector<int>> chunks, const std::vector<int64_t>& weights, int vocab_size,
                           const std::function<void(const MergeStep&)>& on_merge, const char* op) {
    if (vocab_size < 256) fail<ValueError>(op, "vocab_size must be at least 256 (the bytes), got ", vocab_size);
    *this = BasicTokenizer(); // no merges (a RegexTokenizer keeps its special tokens)
    const int num_merges = vocab_size - 256;
    for (int i = 0; i < num_merges; ++i) {
        // Every chunk's pairs, in order of first occurrence, each counted as
        // often as its chunk occurs (count_pairs, over all the chunks).
        std::vector<PairCount> counts;
        std::unordered_map<uint64_t, size_t> where;
        int64_t position = 0;
        for (size_t c = 0; c < chunks.size(); ++c) {
            for (const PairCount& p : count_pairs(chunks[c])) {
                auto [it, is_new] = where.try_emplace(pair_key(p.pair), counts.size());
                if (is_new) counts.push_back({p.pair, 0, position + p.first});
                counts[it->second].count += p.count * weights[c];
            }
            position += static_cast<int64_t>(chunks[c].size());
        }
        if (counts.empty()) break; // no chunk has two ids left
        // The most frequent pair; among equals the first seen (max over a dict in minbpe).
        const PairCount best =
            *std::max_element(counts.begin(), counts.end(), [](const PairCount& a, const PairCount& b) {
                return a.count < b.count || (a.count == b.count && a.first > b.first);
            });
        const int id = this->vocab_size();
        add_merge(best.pair);
        for (std::vector<int>& chunk : chunks) chunk = merge(chunk, best.pair, id);
        if (on_merge) on_merge({i, num_merges, best.pair, id, best.count, vocab_.back()});
    }
}

namespace {

// A text's bytes as ids 0..255, whatever char's sign.
std::vector<int> byte_ids(const std::string& bytes) {
    std::vector<int> ids(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) ids[i] = static_cast<unsigned char>(bytes[i]);
    return ids;
}

} // namespace

void BasicTokenizer::train(const std::string& text, int vocab_size,
                           const std::function<void(const MergeStep&)>& on_merge) {
    learn({byte_ids(text)}, {1}, vocab_size, on_merge, "BasicTokenizer::train");
}

std::vector<int> BasicTokenizer::encode(const std::string& text) const { return encode_chunk(text); }

std::vector<int> BasicTokenizer::encode_chunk(const std::string& bytes) const {
    std::vector<int> ids = byte_ids(bytes);
    // Apply the earliest-learned merge that occurs, everywhere, until none does.
    while (ids.size() >= 2) {
        int lowest = -1; // the smallest merged id among the adjacent pairs
        Pair pair{};
        for (size_t i = 0; i + 1 < ids.size(); ++i) {
            const auto it = merge_id_.find(pair_key({ids[i], ids[i + 1]}));
            if (it != merge_id_.end() && (lowest < 0 || it->second < lowest))
                lowest = it->second, pair = {ids[i], ids[i + 1]};
        }
        if (lowest < 0) break;
        ids = merge(ids, pair, lowest);
    }
    return ids;
}

const std::string& BasicTokenizer::token_bytes(int id) const {
    if (id < 0 || id >= vocab_size())
        fail<IndexError>("BasicTokenizer", "id ", id, " is outside the vocabulary of ", vocab_size(), " tokens");
    return vocab_[static_cast<size_t>(id)];
}

std::string BasicTokenizer::decode_bytes(const std::vector<int>& ids) const {
    std::string bytes;
    for (int id : ids) bytes += token_bytes(id);
    return bytes;
}

std::string BasicTokenizer::decode(const std::vector<int>& ids) const {
    return utf8_replace_invalid(decode_bytes(ids));
}

// ---- files ----------------------------------------------------------------------------------

namespace {

// A token for the .vocab file: its bytes decoded with replacement, control
// characters written as \u00XX (minbpe escapes all of Unicode's category C;
// here only the controls, U+0000-U+001F and U+007F-U+009F).
std::string render(const std::string& bytes) {
    const std::string text = utf8_replace_invalid(bytes);
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        unsigned code = c;
        if (c == 0xC2 && i + 1 < text.size()) code = static_cast<unsigned char>(text[i + 1]); // U+0080-U+00BF
        const bool control = c < 0x20 || c == 0x7F || (c == 0xC2 && code >= 0x80 && code <= 0x9F);
        if (!control) {
            out += static_cast<char>(c);
            continue;
        }
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", code);
        out += buf;
        if (c == 0xC2) ++i;
    }
    return out;
}

void write_whole(const char* op, const std::string& path, const std::string& text) {
    const std::string why = internal::write_file_whole(path, text);
    if (!why.empty()) fail<TokenizerError>(op, "cannot write '", path, "': ", why);
}

} // namespace

std::string BasicTokenizer::model_text(const std::string& pattern, const Specials& specials) const {
    // minbpe v1: the version, the split pattern, the number of special
    // tokens and one a line, then one merge a line, in the order learned.
    std::string model = "minbpe v1\n" + pattern + "\n" + std::to_string(specials.size()) + "\n";
    for (const auto& [text, id] : specials) model += text + " " + std::to_string(id) + "\n";
    for (const Pair& p : merges_) model += std::to_string(p.first) + " " + std::to_string(p.second) + "\n";
    return model;
}

std::string BasicTokenizer::vocab_text() const {
    // One line a token: "[a] 97" for a byte, "[a][a] -> [aa] 256" for a merge.
    std::string vocab;
    for (int id = 0; id < vocab_size(); ++id) {
        if (id >= 256) {
            const Pair p = merges_[static_cast<size_t>(id - 256)];
            vocab.append("[").append(render(token_bytes(p.first))).append("][");
            vocab.append(render(token_bytes(p.second))).append("] -> ");
        }
        vocab.append("[").append(render(token_bytes(id))).append("] ").append(std::to_string(id)).append("\n");
    }
    return vocab;
}

void BasicTokenizer::save(const std::string& prefix) const {
    write_whole("BasicTokenizer::save", prefix + ".model", model_text("", {}));
    write_whole("BasicTokenizer::save", prefix + ".vocab", vocab_text());
}

std::pair<std::string, BasicTokenizer::Specials> BasicTokenizer::read_model(const std::string& path, const char* op,
                                                                            BasicTokenizer& into) {
    std::ifstream in(path, std::ios::binary);
    if (!in || std::filesystem::is_directory(path)) fail<TokenizerError>(op, "cannot open '", path, "' as a file");
    int line_number = 0;
    std::string line;
    auto next_line = [&](const char* what) {
        if (!std::getline(in, line)) fail<TokenizerError>(op, path, ": ends at line ", line_number, ", before ", what);
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back(); // written on Windows
    };
    auto bad = [&](const std::string& why) {
        fail<TokenizerError>(op, path, ":", line_number, ": ", why, " (\"", line.substr(0, 60), "\")");
    };
    next_line("the version");
    if (line != "minbpe v1") bad("not a minbpe v1 model file");
    next_line("the split pattern");
    const std::string pattern = line;
    next_line("the number of special tokens");
    long long count = -1;
    std::string rest;
    std::istringstream count_field(line);
    if (!(count_field >> count) || (count_field >> rest) || count < 0 || count > 1000000)
        bad("expected the number of special tokens");
    Specials specials;
    for (long long k = 0; k < count; ++k) {
        next_line("a special token");
        const size_t space = line.rfind(' ');
        long long id = -1;
        std::istringstream id_field(space == std::string::npos ? "" : line.substr(space + 1));
        if (space == 0 || space == std::string::npos || !(id_field >> id) || (id_field >> rest) || id < 0 ||
            id > INT32_MAX)
            bad("expected a special token: its text, a space and its id");
        specials.emplace_back(line.substr(0, space), static_cast<int>(id));
    }
    while (std::getline(in, line)) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::istringstream fields(line);
        long long a = -1, b = -1;
        if (!(fields >> a >> b) || (fields >> rest)) bad("expected a merge: two ids separated by a space");
        // A merge may only join ids that exist before it.
        if (a < 0 || b < 0 || a >= into.vocab_size() || b >= into.vocab_size())
            bad("a merge of an id not yet defined (this merge makes id " + std::to_string(into.vocab_size()) + ")");
        const Pair pair{static_cast<int>(a), static_cast<int>(b)};
        if (const auto it = into.merge_id_.find(pair_key(pair)); it != into.merge_id_.end())
            bad("the pair was merged before, into id " + std::to_string(it->second));
        into.add_merge(pair);
    }
    return {pattern, specials};
}

BasicTokenizer BasicTokenizer::load(const std::string& model_file) {
    BasicTokenizer t;
    const auto [pattern, specials] = read_model(model_file, "BasicTokenizer::load", t);
    if (!pattern.empty())
        fail<TokenizerError>("BasicTokenizer::load", model_file,
                             ":2: the model has a split pattern (a RegexTokenizer's); BasicTokenizer has none");
    if (!specials.empty())
        fail<TokenizerError>("BasicTokenizer::load", model_file,
                             ":3: the model has special tokens (a RegexTokenizer's); BasicTokenizer has none");
    return t;
}

// ---- RegexTokenizer -------------------------------------------------------------------------

void RegexTokenizer::train(const std::string& text, int vocab_size,
                           const std::function<void(const MergeStep&)>& on_merge) {
    // The pieces, each distinct one once with how often it occurs, in order
    // of first occurrence: the same counts, and the same first-seen order of
    // pairs, as counting over every piece in the text.
    std::vector<std::vector<int>> chunks;
    std::vector<int64_t> weights;
    std::unordered_map<std::string, size_t> index;
    for (const std::string& piece : split_gpt2(text)) {
        auto [it, is_new] = index.try_emplace(piece, chunks.size());
        if (is_new) chunks.push_back(byte_ids(piece)), weights.push_back(0);
        ++weights[it->second];
    }
    for (const auto& [special, id] : specials_) // checked before the work: no merge may take a special's id
        if (id < vocab_size)
            fail<ValueError>("RegexTokenizer::train", "vocab_size ", vocab_size, " would give merges the id ", id,
                             " of special token \"", special, "\"");
    learn(std::move(chunks), weights, vocab_size, on_merge, "RegexTokenizer::train"); // keeps specials_
}

void RegexTokenizer::register_special_tokens(const Specials& specials) {
    Specials all = specials_;
    for (const auto& [text, id] : specials) {
        if (text.empty()) fail<ValueError>("RegexTokenizer", "a special token's text is empty (id ", id, ")");
        if (text.find_first_of(" \t\r\n\v\f") != std::string::npos)
            fail<ValueError>("RegexTokenizer", "special token \"", text,
                             "\" holds white space, which minbpe's .model file cannot hold");
        if (id < 0) fail<ValueError>("RegexTokenizer", "special token \"", text, "\" has a negative id, ", id);
        if (id < vocab_size())
            fail<ValueError>("RegexTokenizer", "special token \"", text, "\" has id ", id,
                             ", which a byte or merge holds (the vocabulary has ", vocab_size(), ")");
        for (const auto& [other, other_id] : all)
            if (other == text || other_id == id)
                fail<ValueError>("RegexTokenizer", "special token \"", text, "\" (", id, ") repeats \"", other, "\" (",
                                 other_id, ")");
        all.emplace_back(text, id);
    }
    specials_ = all;
}

std::vector<int> RegexTokenizer::encode_ordinary(const std::string& text) const {
    std::vector<int> ids;
    for (const std::string& piece : split_gpt2(text)) {
        const std::vector<int> piece_ids = encode_chunk(piece);
        ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    }
    return ids;
}

std::vector<int> RegexTokenizer::encode(const std::string& text, AllowedSpecial allowed) const {
    if (allowed == AllowedSpecial::None || specials_.empty()) return encode_ordinary(text);
    // The earliest special token in the text (the first registered where two
    // start at one place), the text before it as ordinary text, and so on.
    std::vector<int> ids;
    size_t from = 0;
    while (true) {
        size_t at = std::string::npos;
        const std::pair<std::string, int>* found = nullptr;
        for (const auto& special : specials_) {
            const size_t p = text.find(special.first, from);
            if (p < at) at = p, found = &special;
        }
        if (!found) break;
        if (allowed == AllowedSpecial::NoneRaise)
            fail<ValueError>("RegexTokenizer::encode", "the text holds the special token \"", found->first,
                             "\" at byte ", at, "; pass AllowedSpecial::All to encode it as one, or None as text");
        const std::vector<int> before = encode_ordinary(text.substr(from, at - from));
        ids.insert(ids.end(), before.begin(), before.end());
        ids.push_back(found->second);
        from = at + found->first.size();
    }
    const std::vector<int> rest = encode_ordinary(text.substr(from));
    ids.insert(ids.end(), rest.begin(), rest.end());
    return ids;
}

std::string RegexTokenizer::decode_bytes(const std::vector<int>& ids) const {
    std::string bytes;
    for (int id : ids) {
        if (id >= vocab_size()) {
            const auto it =
                std::find_if(specials_.begin(), specials_.end(), [id](const auto& s) { return s.second == id; });
            if (it != specials_.end()) {
                bytes += it->first;
                continue;
            }
        }
        if (id < 0 || id >= vocab_size())
            fail<IndexError>("RegexTokenizer", "id ", id, " is neither a token (0 to ", vocab_size() - 1,
                             ") nor a special token");
        bytes += token_bytes(id);
    }
    return bytes;
}

std::string RegexTokenizer::decode(const std::vector<int>& ids) const {
    return utf8_replace_invalid(decode_bytes(ids));
}

void RegexTokenizer::save(const std::string& prefix) const {
    write_whole("RegexTokenizer::save", prefix + ".model", model_text(kGPT2Pattern, specials_));
    write_whole("RegexTokenizer::save", prefix + ".vocab", vocab_text());
}

RegexTokenizer RegexTokenizer::load(const std::string& model_file) {
    RegexTokenizer t;
    const auto [pattern, specials] = read_model(model_file, "RegexTokenizer::load", t);
    if (pattern != kGPT2Pattern && pattern != kGPT2PatternOpenAI)
        fail<TokenizerError>("RegexTokenizer::load", model_file, ":2: the split pattern is not GPT-2's (\"",
                             pattern.substr(0, 60), "\"); ember's RegexTokenizer splits with GPT-2's only");
    try {
        t.register_special_tokens(specials);
    } catch (const ValueError& e) {
        fail<TokenizerError>("RegexTokenizer::load", model_file, ": ", e.what());
    }
    return t;
}

} // namespace ember::tokenizer
