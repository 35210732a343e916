// Text as the "Let's build GPT" lecture feeds it to a model: a vocabulary of
// the characters that occur (sorted), the text encoded as one int64 tensor,
// the first 90% for training and the rest for validation, and random batches
// drawn exactly as the lecture's get_batch draws them.
// Characters are bytes: ASCII text (tiny Shakespeare) is encoded as Python
// would; other UTF-8 text is encoded byte by byte. Reading the text checks
// it first (a file, readable, text, long enough) and says what is wrong.
// Tests: tests/test_train_gpt.cpp.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ember.h>

namespace train {

// A problem with the user's input (data, checkpoint, prompt): exit status 2.
class InputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The bytes of the text file `path` given to `flag` (--data). Throws
// InputError saying exactly what is wrong: it cannot be read (missing,
// no permission: the system's reason), it is a directory or not a regular
// file, it is empty, or it is not text (check_text).
std::string read_text_file(const std::string& path, const std::string& flag = "--data");

// Throws InputError naming `name` unless `bytes` read as text: no NUL byte,
// and valid UTF-8 (ASCII is). The message gives the first bad byte's offset.
void check_text(const std::string& bytes, const std::string& name);

// The tokens a run trains on. By default the characters of its text, as
// gpt.py's chars = sorted(list(set(text))) (each byte a character); with
// --tokenizer, a BPE tokenizer's: "gpt2" (GPT-2's own, data/gpt2) or a
// .model file that `tokenize train` wrote (examples/open_tokenizer.h). A
// checkpoint keeps every token's bytes, which is all decoding needs; encoding
// BPE needs the tokenizer itself, which a resumed run opens again by name.
class Vocab {
public:
    static Vocab from_text(const std::string& text);
    static Vocab from_chars(std::string chars); // the sorted, distinct characters
    // Opens --tokenizer NAME. InputError if it cannot (the reason: a missing
    // file, not a .model file, GPT-2's files with the wrong hash).
    static Vocab from_tokenizer(const std::string& name);
    // A BPE vocabulary as a checkpoint holds it: the tokenizer's name and each
    // id's bytes. The tokenizer is opened again when something is encoded.
    static Vocab from_tokens(std::string name, std::vector<std::string> tokens);

    int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
    bool is_chars() const { return tokenizer_.empty(); }
    const std::string& tokenizer() const { return tokenizer_; } // "" for characters
    const char* unit() const { return is_chars() ? "characters" : "tokens"; }
    std::string chars() const; // a character vocabulary's characters, in id order
    const std::vector<std::string>& tokens() const { return tokens_; } // id -> its bytes
    // Throws std::invalid_argument naming the first character not in the
    // vocabulary; InputError if a BPE tokenizer cannot be opened.
    std::vector<int64_t> encode(const std::string& text) const;
    // Any shape of int64 ids. BPE tokens' bytes are joined, and a UTF-8
    // sequence they leave broken is replaced by U+FFFD (GPT-2's errors="replace").
    std::string decode(const ember::Tensor& ids) const;
    // The bytes of each id, one string per position (attention maps' labels).
    std::vector<std::string> pieces(const std::vector<int64_t>& ids) const;

private:
    std::string tokenizer_;
    std::vector<std::string> tokens_;
    std::vector<int> index_ = std::vector<int>(256, -1); // characters: byte -> id, or -1
    // The BPE tokenizer's encode, opened by from_tokenizer or at the first encode.
    mutable std::function<std::vector<int>(const std::string&)> bpe_encode_;
};

struct Splits {
    ember::Tensor train, val; // int64, 1-D
};

// n = int(0.9 * len): the lecture's split.
Splits split_90_10(const ember::Tensor& data);

// Throws InputError naming `name` unless each split holds more than
// block_size tokens (one block and the token after it); `unit` names them
// ("characters", "tokens").
void check_split_lengths(const Splits& data, int64_t block_size, const std::string& name,
                         const std::string& unit = "characters");

// ix = randint(len(data) - block_size, (batch_size,)); x = data[i : i+T] and
// y = data[i+1 : i+T+1] for each i, stacked: (B,T) each. One draw of B words
// from the default generator, as torch.randint.
std::pair<ember::Tensor, ember::Tensor> get_batch(const ember::Tensor& data, int64_t batch_size, int64_t block_size);

// This process's share of get_batch's batch, under mpirun -np N: every rank
// draws the same batch_size rows (the same generator state, the same draw),
// and rank r keeps rows [r B/N, (r+1) B/N), (B/N,T) each. With one process:
// the whole batch. batch_size must be divisible by N (start_session checks).
std::pair<ember::Tensor, ember::Tensor> get_batch_share(const ember::Tensor& data, int64_t batch_size,
                                                        int64_t block_size);

// A 64-bit fingerprint of a text (FNV-1a), to recognise a corpus on resume.
uint64_t fingerprint(const std::string& text);

} // namespace train
