// Text as the "Let's build GPT" lecture feeds it to a model: a vocabulary of
// the characters that occur (sorted), the text encoded as one int64 tensor,
// the first 90% for training and the rest for validation, and random batches
// drawn exactly as the lecture's get_batch draws them.
// Characters are bytes: ASCII text (tiny Shakespeare) is encoded as Python
// would; other UTF-8 text is encoded byte by byte. Reading the text checks
// it first (a file, readable, text, long enough) and says what is wrong.
// Tests: tests/test_train_gpt.cpp.
#pragma once

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

class Vocab {
public:
    static Vocab from_text(const std::string& text);
    static Vocab from_chars(std::string chars); // the sorted, distinct characters
    int64_t size() const { return static_cast<int64_t>(chars_.size()); }
    const std::string& chars() const { return chars_; }
    // Throws std::invalid_argument naming the first character not in the vocabulary.
    std::vector<int64_t> encode(const std::string& text) const;
    std::string decode(const ember::Tensor& ids) const; // any shape of int64 ids

private:
    std::string chars_;
    std::vector<int> index_ = std::vector<int>(256, -1); // byte -> id, or -1
};

struct Splits {
    ember::Tensor train, val; // int64, 1-D
};

// n = int(0.9 * len): the lecture's split.
Splits split_90_10(const ember::Tensor& data);

// Throws InputError naming `name` unless each split holds more than
// block_size characters (one block and the character after it).
void check_split_lengths(const Splits& data, int64_t block_size, const std::string& name);

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
