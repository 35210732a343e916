// The synthetic sequence tasks of train_tasks: copy, reverse or sort a
// string of L digits, written out as a causal language model reads them,
// and a model without attention to compare with. Vocabulary: the digits
// 0-9 and the separator '|' (V = 11); every sequence has the same length,
// so no padding or end mark is needed:
//
//   copy     31415926|31415926      reverse  31415926|62951413
//   sort     31415926|11234569
//
// Answer digit i depends on a prompt digit at another position (i, L-1-i, or
// wherever the i-th smallest digit is), so a model whose positions cannot
// read one another (NoAttentionLM) can only guess it. docs/training.md
// (section train_tasks); tests in tests/test_train_tasks.cpp.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include <ember.h>

namespace train {

enum class Task { Copy, Reverse, Sort };

const char* task_name(Task task);
Task task_from_name(const std::string& name); // throws std::invalid_argument
const std::vector<Task>& all_tasks();

constexpr int64_t kSeparator = 10; // '|'
constexpr int64_t kTaskVocab = 11; // digits 0-9 and '|'
constexpr int64_t kIgnore = -100;  // cross_entropy's ignore_index
constexpr int64_t kMaxLength = 18; // a prompt must fit in a uint64 key (prompt_key)

// The answer to one prompt of digits: the same digits, reversed, or sorted.
std::vector<int64_t> answer(Task task, const std::vector<int64_t>& prompt);

// Digits and '|' as text: {3,1,4,10,3,1,4} -> "314|314".
std::string to_text(const std::vector<int64_t>& ids);

// A prompt read as a decimal number: the identity of a prompt, for keeping
// the evaluation prompts out of training.
uint64_t prompt_key(const int64_t* digits, int64_t length);

// n prompts of `length` uniform digits: (n, length) int64, drawn with ember's
// randint from `generator`, so a seed fixes them.
ember::Tensor random_prompts(int64_t n, int64_t length, ember::Generator& generator);

// The teacher-forced training pair for prompts (B,L):
//   sequence s = prompt, '|', answer                    (B, 2L+1)
//   x = s[:, :2L]   y[:, t] = s[:, t+1] for t >= L      (B, 2L) each
// so the loss only sees the answer digits (y is kIgnore on the prompt). A row
// whose prompt is in `held_out` is masked out entirely (all kIgnore): the
// model never trains on an evaluation prompt. `masked` counts those rows.
struct Batch {
    ember::Tensor x, y;
    int64_t masked = 0;
};
Batch make_batch(Task task, const ember::Tensor& prompts, const std::unordered_set<uint64_t>& held_out);

// The same embeddings, MLP blocks, final LayerNorm and head as gpt.py's
// GPTLanguageModel (nn/gpt.h), with the attention taken out of each block:
//   x = tok_emb(idx) + pos_emb(t);  x = x + ffwd(ln(x))  (n_layer times);  logits = head(ln_f(x))
// Each position sees only its own token and its own position, so it cannot
// learn anything that depends on another position's token. Initialised as
// gpt.py's _init_weights (weights N(0, 0.02), biases 0). forward: idx (B,T)
// -> (B,T,V). Parameter names follow GPTLanguageModel's, less the attention:
// blocks.0.ln2, blocks.0.ffwd.net.0.weight, ...
class MLPBlock : public ember::nn::Module {
public:
    explicit MLPBlock(int64_t n_embd);
    // x (B,T,C) -> x + ffwd(ln2(x)) (B,T,C): nn::Block without its x + sa(ln1(x)) line.
    ember::Tensor forward(const ember::Tensor& x) override;
    std::shared_ptr<ember::nn::FeedForward> ffwd;
    std::shared_ptr<ember::nn::LayerNorm> ln2;
};

class NoAttentionLM : public ember::nn::Module {
public:
    NoAttentionLM(int64_t vocab_size, int64_t block_size, int64_t n_embd, int64_t n_layer);
    ember::Tensor forward(const ember::Tensor& idx) override;

    const int64_t block_size;
    std::shared_ptr<ember::nn::Embedding> token_embedding_table, position_embedding_table;
    std::shared_ptr<ember::nn::Sequential> blocks; // of MLPBlock
    std::shared_ptr<ember::nn::LayerNorm> ln_f;
    std::shared_ptr<ember::nn::Linear> lm_head;
};

// Greedy decoding: appends '|' to prompts (N,L), then `length` times the
// argmax of the model's logits at the last position. Returns the answers
// (N, length). No graph; call model.eval() first.
ember::Tensor greedy_answers(ember::nn::Module& model, const ember::Tensor& prompts, int64_t length);

struct Accuracy {
    double exact = 0;  // answers right in every digit
    double digits = 0; // answer digits right
};
// Held-out accuracy of the answers (N,L) the model decodes for prompts
// (N,L), in chunks of `chunk` rows to bound memory. Puts the model in eval
// mode and back.
Accuracy evaluate(ember::nn::Module& model, Task task, const ember::Tensor& prompts, ember::Tensor* decoded = nullptr,
                  int64_t chunk = 500);

} // namespace train
