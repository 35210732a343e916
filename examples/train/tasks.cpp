// The tasks, their batches, the no-attention model and greedy evaluation:
// see tasks.h.
#include "tasks.h"

#include <algorithm>
#include <stdexcept>

namespace train {

using namespace ember;

const char* task_name(Task task) {
    switch (task) {
    case Task::Copy: return "copy";
    case Task::Reverse: return "reverse";
    case Task::Sort: return "sort";
    }
    return "?";
}

Task task_from_name(const std::string& name) {
    for (Task t : all_tasks())
        if (name == task_name(t)) return t;
    throw std::invalid_argument("unknown task '" + name + "' (the tasks are copy, reverse, sort and all)");
}

const std::vector<Task>& all_tasks() {
    static const std::vector<Task> tasks = {Task::Copy, Task::Reverse, Task::Sort};
    return tasks;
}

std::vector<int64_t> answer(Task task, const std::vector<int64_t>& prompt) {
    std::vector<int64_t> out = prompt;
    if (task == Task::Reverse) std::reverse(out.begin(), out.end());
    if (task == Task::Sort) std::sort(out.begin(), out.end());
    return out;
}

std::string to_text(const std::vector<int64_t>& ids) {
    std::string s;
    for (int64_t id : ids) s += id == kSeparator ? '|' : static_cast<char>('0' + id);
    return s;
}

uint64_t prompt_key(const int64_t* digits, int64_t length) {
    uint64_t key = 0;
    for (int64_t i = 0; i < length; ++i) key = key * 10 + static_cast<uint64_t>(digits[i]);
    return key;
}

Tensor random_prompts(int64_t n, int64_t length, Generator& generator) {
    return randint(0, 10, {n, length}, {}, &generator);
}

Batch make_batch(Task task, const Tensor& prompts, const std::unordered_set<uint64_t>& held_out) {
    if (prompts.dim() != 2 || prompts.dtype() != kInt64)
        throw std::invalid_argument("make_batch: prompts must be (B,L) int64, got " + shape_str(prompts.shape()));
    const int64_t B = prompts.size(0), L = prompts.size(1);
    Tensor p = prompts.contiguous();
    const int64_t* digits = p.data_ptr<int64_t>();
    std::vector<int64_t> x(static_cast<size_t>(B * 2 * L)), y(x.size(), kIgnore);
    Batch batch;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t* row = digits + b * L;
        std::vector<int64_t> prompt(row, row + L);
        std::vector<int64_t> ans = answer(task, prompt);
        // s = prompt | answer (2L+1 tokens); x is s without its last token.
        int64_t* xb = x.data() + b * 2 * L;
        int64_t* yb = y.data() + b * 2 * L;
        for (int64_t t = 0; t < L; ++t) xb[t] = prompt[static_cast<size_t>(t)];
        xb[L] = kSeparator;
        for (int64_t t = 0; t + 1 < L; ++t) xb[L + 1 + t] = ans[static_cast<size_t>(t)];
        if (held_out.count(prompt_key(row, L))) {
            ++batch.masked; // an evaluation prompt: no loss on this row
            continue;
        }
        // Position L+i holds '|' or answer digit i-1 and predicts answer digit i.
        for (int64_t i = 0; i < L; ++i) yb[L + i] = ans[static_cast<size_t>(i)];
    }
    batch.x = from_vector(x, {B, 2 * L});
    batch.y = from_vector(y, {B, 2 * L});
    return batch;
}

MLPBlock::MLPBlock(int64_t n_embd) : Module("MLPBlock") {
    ffwd = register_module("ffwd", std::make_shared<nn::FeedForward>(n_embd, 0.0));
    ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(n_embd));
}

Tensor MLPBlock::forward(const Tensor& x) { return x + (*ffwd)((*ln2)(x)); }

NoAttentionLM::NoAttentionLM(int64_t vocab_size, int64_t block_size_, int64_t n_embd, int64_t n_layer)
    : Module("NoAttentionLM"), block_size(block_size_) {
    token_embedding_table =
        register_module("token_embedding_table", std::make_shared<nn::Embedding>(vocab_size, n_embd));
    position_embedding_table =
        register_module("position_embedding_table", std::make_shared<nn::Embedding>(block_size, n_embd));
    blocks = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < n_layer; ++i) blocks->push_back(std::make_shared<MLPBlock>(n_embd));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(n_embd));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(n_embd, vocab_size));
    // gpt.py's _init_weights, as the attention model's, so the two start alike.
    apply([](nn::Module& m) {
        if (auto* linear = dynamic_cast<nn::Linear*>(&m)) {
            nn::init::normal_(linear->weight, 0.0, 0.02);
            if (linear->bias.defined()) nn::init::zeros_(linear->bias);
        } else if (auto* emb = dynamic_cast<nn::Embedding*>(&m)) {
            nn::init::normal_(emb->weight, 0.0, 0.02);
        }
    });
}

Tensor NoAttentionLM::forward(const Tensor& idx) {
    if (idx.dim() != 2 || idx.dtype() != kInt64 || idx.size(1) > block_size)
        fail<ShapeError>("NoAttentionLM", "idx must be (B,T) int64 with T <= block_size=", block_size, ", got ",
                         dtype_name(idx.dtype()), " ", idx.shape());
    Tensor x = (*token_embedding_table)(idx) + (*position_embedding_table)(arange(idx.size(1))); // (B,T,C)
    x = (*blocks)(x);                                                                            // (B,T,C)
    return (*lm_head)((*ln_f)(x));                                                               // (B,T,V)
}

Tensor greedy_answers(nn::Module& model, const Tensor& prompts, int64_t length) {
    NoGradGuard no_grad;
    const int64_t N = prompts.size(0);
    Tensor context = cat({prompts, full({N, 1}, kSeparator)}, 1); // (N, L+1)
    for (int64_t i = 0; i < length; ++i) {
        // Only the last position's logits matter: (N,T,V) -> (N,V) -> argmax (N,1).
        Tensor logits = model(context).select(1, context.size(1) - 1);
        context = cat({context, argmax(logits, -1, true)}, 1);
    }
    return context.slice(1, prompts.size(1) + 1).contiguous(); // (N, length)
}

Accuracy evaluate(nn::Module& model, Task task, const Tensor& prompts, Tensor* decoded, int64_t chunk) {
    const int64_t N = prompts.size(0), L = prompts.size(1);
    const bool was_training = model.is_training();
    model.eval();
    std::vector<Tensor> parts;
    for (int64_t start = 0; start < N; start += chunk)
        parts.push_back(greedy_answers(model, prompts.slice(0, start, std::min(N, start + chunk)), L));
    model.train(was_training);
    Tensor got = cat(parts, 0); // (N,L)
    if (decoded) *decoded = got;

    Tensor p = prompts.contiguous();
    const int64_t* digits = p.data_ptr<int64_t>();
    const int64_t* out = got.data_ptr<int64_t>();
    int64_t exact = 0, right_digits = 0;
    for (int64_t n = 0; n < N; ++n) {
        std::vector<int64_t> want = answer(task, std::vector<int64_t>(digits + n * L, digits + (n + 1) * L));
        int64_t right = 0;
        for (int64_t i = 0; i < L; ++i) right += out[n * L + i] == want[static_cast<size_t>(i)];
        right_digits += right;
        exact += right == L;
    }
    return {static_cast<double>(exact) / static_cast<double>(N),
            static_cast<double>(right_digits) / static_cast<double>(N * L)};
}

} // namespace train
