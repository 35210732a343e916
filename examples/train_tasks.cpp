// train_tasks: sequence tasks that only a model with attention can solve.
//
// For each task (copy, reverse or sort a string of digits, examples/train/
// tasks.h) it trains a small GPT (gpt.py's, run by the fast model of
// nn/fast_gpt.h) as a causal language model with the loss on the answer
// digits only, then decodes the answers greedily for a fixed set of
// held-out prompts that no training batch contains, and counts the answers
// right in every digit. Beside it, the same model with
// its attention taken out (NoAttentionLM) trains on the same batches and
// fails: no position can read another's token. The last line is
// machine-readable: final: copy=... baseline_copy=... seconds=...
// docs/training.md (section train_tasks) explains it; tests in
// tests/test_train_tasks.cpp.
//
//   build/examples/train_tasks [--task copy|reverse|sort|all] [--help]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numbers>
#include <stdexcept>
#include <string>

#include <ember.h>

#include "flags.h"
#include "train/guard.h"
#include "train/memory.h"
#include "train/tasks.h"

using namespace ember;
using namespace train;

namespace {

using flags::UsageError; // a bad command line: exit status 2

// The evaluation prompts come from their own generator with this fixed
// seed, whatever --seed is: runs with different seeds are scored on the same
// sequences.
constexpr uint64_t kEvalSeed = 20240;

struct Options {
    std::vector<Task> tasks = all_tasks();
    int64_t length = 10;        // digits per prompt (and per answer)
    int64_t steps = 0;          // attention model's training steps; 0: the task's default
    int64_t baseline_steps = 0; // 0: the default below
    int64_t batch_size = 64;
    double lr = 3e-3;
    double max_grad_norm = INFINITY; // clip the gradients' global norm to this (infinity: no clipping)
    int64_t n_embd = 32;
    int64_t n_head = 4;
    int64_t n_layer = 2;
    int64_t eval_size = 1000;
    uint64_t seed = 1337;
    int threads = 0; // 0: OpenMP's default
};

// Steps that reach 99% exact match on 10 digits with margin: copy and
// reverse were at 1.000 after 200, sort at 0.999-1.000 after 800 (docs/
// training.md has the measurements). Sorting needs more: an answer digit
// depends on the whole prompt, not on one position of it.
int64_t default_steps(Task task) { return task == Task::Sort ? 1000 : 400; }

// The baseline's loss stops falling within a few hundred steps (it can only
// learn which digits are likely at each position), so it trains for fewer.
constexpr int64_t kBaselineSteps = 300;

std::string usage() {
    return "usage: train_tasks [options]\n"
           "Trains a small GPT to copy, reverse and sort strings of digits, and the same model\n"
           "without attention beside it, and reports held-out exact-match accuracy.\n"
           "  --task NAME            copy, reverse, sort or all (default all)\n"
           "  --length N             digits per prompt, 2-18 (default 10)\n"
           "  --steps N              training steps of the attention model (default 400; sort 1000)\n"
           "  --baseline-steps N     training steps of the no-attention baseline (default 300,\n"
           "                         or --steps if that is fewer)\n"
           "  --batch-size N         sequences per step (default 64)\n"
           "  --lr X                 peak AdamW learning rate (default 3e-3)\n"
           "  --max-grad-norm X      clip the gradients' global norm to X (default: no clipping)\n"
           "  --n-embd N, --n-head N, --n-layer N   model size (default 32, 4, 2)\n"
           "  --eval-size N          held-out prompts to evaluate (default 1000)\n"
           "  --seed N               seed of the weights and the training data (default 1337)\n"
           "  --threads N            threads for the kernels (default: OpenMP's)\n"
           "  --help                 this message\n";
}

// Returns false after printing the usage for --help.
bool parse_options(int argc, char** argv, Options& o) {
    using flags::integer;
    constexpr int64_t kBig = 1'000'000'000;
    const std::vector<flags::Flag> given =
        flags::parse(argc, argv,
                     {"--task", "--length", "--steps", "--baseline-steps", "--batch-size", "--lr", "--max-grad-norm",
                      "--n-embd", "--n-head", "--n-layer", "--eval-size", "--seed", "--threads"},
                     {"--help"});
    for (const auto& [flag, value] : given) {
        if (flag == "--help") {
            std::cout << usage();
            return false;
        }
        if (flag == "--task") {
            try {
                o.tasks = value == "all" ? all_tasks() : std::vector<Task>{task_from_name(value)};
            } catch (const std::invalid_argument& e) {
                throw UsageError(std::string("--task: ") + e.what());
            }
        } else if (flag == "--length") o.length = integer(flag, value, 2, kMaxLength);
        else if (flag == "--steps") o.steps = integer(flag, value, 1, kBig);
        else if (flag == "--baseline-steps") o.baseline_steps = integer(flag, value, 1, kBig);
        else if (flag == "--batch-size") o.batch_size = integer(flag, value, 1, 1 << 20);
        else if (flag == "--lr") o.lr = flags::positive(flag, value);
        else if (flag == "--max-grad-norm") o.max_grad_norm = flags::positive(flag, value);
        else if (flag == "--n-embd") o.n_embd = integer(flag, value, 1, 1 << 16);
        else if (flag == "--n-head") o.n_head = integer(flag, value, 1, 1 << 16);
        else if (flag == "--n-layer") o.n_layer = integer(flag, value, 1, 64);
        else if (flag == "--eval-size") o.eval_size = integer(flag, value, 1, 1 << 24);
        else if (flag == "--seed") o.seed = flags::seed(flag, value);
        else if (flag == "--threads") o.threads = static_cast<int>(integer(flag, value, 1, ember::max_num_threads()));
    }
    if (o.n_embd % o.n_head != 0)
        throw UsageError("--n-embd (" + std::to_string(o.n_embd) + ") must be divisible by --n-head (" +
                         std::to_string(o.n_head) + ")");
    return true;
}

using flags::format;

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Linear warm-up over the first 5% of the steps, then a cosine from lr down
// to lr/10: a high rate to learn fast, a low one at the end to settle, since
// a 99% exact match on 10 digits needs each digit right 99.9% of the time.
// Measured on sort (docs/training.md): a constant 3e-3 does about as well
// or a little worse (0.993-0.999 over four seeds, against 0.997-1.000); a
// constant 1e-3 reaches only 0.839 in the same 1000 steps.
double lr_at(int64_t step, int64_t steps, double lr) {
    const int64_t warmup = std::max<int64_t>(1, steps / 20);
    if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
    double progress = static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, steps - warmup));
    return lr * (0.1 + 0.45 * (1 + std::cos(std::numbers::pi * progress)));
}

struct Outcome {
    Accuracy accuracy;
    Tensor decoded; // (N,L) greedy answers to the evaluation prompts
    double seconds = 0;
};

// Trains `model` for `steps` AdamW steps on random prompts drawn from a
// generator seeded with o.seed (so both models see the same batches),
// printing a few progress lines, and scores it on the evaluation prompts.
Outcome train_and_evaluate(nn::Module& model, Task task, const Options& o, int64_t steps, const Tensor& eval_prompts,
                           const std::unordered_set<uint64_t>& held_out) {
    auto start = std::chrono::steady_clock::now();
    Generator data(o.seed);
    optim::AdamW optimizer(model.parameters(), {.lr = o.lr});
    const int64_t log_every = std::max<int64_t>(1, steps / 5);
    double loss_sum = 0;
    int64_t loss_count = 0, right = 0, counted = 0, masked = 0;
    model.train();
    for (int64_t step = 0; step < steps; ++step) {
        Batch batch = make_batch(task, random_prompts(o.batch_size, o.length, data), held_out);
        masked += batch.masked;
        // A batch of evaluation prompts only (possible with tiny batches) has
        // no loss at all (the mean over zero targets is NaN): no step then.
        if (batch.masked < o.batch_size) {
            Tensor logits = model.forward(batch.x); // (B,2L,V)
            // Mean over the answer positions only: y is -100 (ignored) on the prompt.
            Tensor loss = cross_entropy(logits.view({-1, kTaskVocab}), batch.y.view({-1}));
            optimizer.options.lr = lr_at(step, steps, o.lr);
            optimizer.zero_grad();
            loss.backward();
            double grad_norm = optim::clip_grad_norm_(model.parameters(), o.max_grad_norm);
            if (!finite_step(loss.item(), grad_norm,
                             o.max_grad_norm)) // nothing to lose: train_tasks keeps no checkpoint
                throw DivergedError(divergence_message(step, loss.item(), grad_norm, o.lr, o.max_grad_norm));
            optimizer.step();

            // Progress: the mean loss since the last line, and how many answer
            // digits the model got right with the true previous digits given.
            loss_sum += loss.item();
            ++loss_count;
            Tensor guess = argmax(logits.detach(), -1).contiguous(); // (B,2L)
            const int64_t* g = guess.data_ptr<int64_t>();
            const int64_t* y = batch.y.data_ptr<int64_t>();
            for (int64_t k = 0; k < batch.y.numel(); ++k)
                if (y[k] != kIgnore) {
                    ++counted;
                    right += g[k] == y[k];
                }
        }
        if ((step + 1) % log_every == 0 || step + 1 == steps) {
            std::cout << "  step " << format("%5.0f", double(step + 1)) << "/" << steps
                      << format("  loss %.4f  answer digits right %5.1f%%  lr %.2e",
                                loss_sum / double(std::max<int64_t>(1, loss_count)),
                                100.0 * double(right) / double(std::max<int64_t>(1, counted)), optimizer.options.lr)
                      << "\n";
            loss_sum = 0;
            loss_count = right = counted = 0;
        }
    }
    Outcome out;
    out.accuracy = evaluate(model, task, eval_prompts, &out.decoded);
    out.seconds = seconds_since(start);
    std::cout << "  held-out exact match " << format("%.3f", out.accuracy.exact) << " (digits right "
              << format("%.3f", out.accuracy.digits) << "), " << format("%.1f s", out.seconds);
    if (masked > 0)
        std::cout << "; " << masked
                  << (masked == 1 ? " training prompt was an evaluation prompt"
                                  : " training prompts were evaluation prompts")
                  << " and carried no loss";
    std::cout << "\n";
    return out;
}

std::string row_text(const Tensor& t, int64_t n) {
    Tensor row = t[n].contiguous();
    const int64_t* p = row.data_ptr<int64_t>();
    return to_text(std::vector<int64_t>(p, p + row.numel()));
}

struct TaskResult {
    double attention = 0, baseline = 0;
};

// The fixed evaluation prompts (N,L), the same for every task and seed,
// and the keys that keep them out of training.
struct EvalSet {
    Tensor prompts;
    std::unordered_set<uint64_t> held_out;
};

EvalSet make_eval_set(const Options& o) {
    const int64_t L = o.length;
    Generator eval_gen(kEvalSeed);
    EvalSet e{random_prompts(o.eval_size, L, eval_gen), {}};
    for (int64_t n = 0; n < o.eval_size; ++n)
        e.held_out.insert(prompt_key(e.prompts[n].contiguous().data_ptr<int64_t>(), L));
    // Short prompts have few distinct values (10^L): keep at least half of them for training.
    const double distinct = std::pow(10.0, static_cast<double>(L));
    if (2 * static_cast<double>(e.held_out.size()) > distinct)
        throw UsageError("--eval-size " + std::to_string(o.eval_size) + " holds out " +
                         std::to_string(e.held_out.size()) + " of the " + format("%.0f", distinct) + " prompts of " +
                         std::to_string(L) +
                         " digits, leaving too few to train on; use a smaller --eval-size or a larger --length");
    return e;
}

// The attention model's settings: gpt.py's GPT over the task's 2L positions.
ModelConfig attention_model(const Options& o) {
    return {.stage = Stage::GPT,
            .vocab_size = kTaskVocab,
            .block_size = 2 * o.length,
            .n_embd = o.n_embd,
            .n_head = o.n_head,
            .n_layer = o.n_layer};
}

TaskResult run_task(Task task, const Options& o, const EvalSet& eval) {
    const Tensor& eval_prompts = eval.prompts;
    const std::unordered_set<uint64_t>& held_out = eval.held_out;
    const int64_t L = o.length, T = 2 * L;
    const int64_t steps = o.steps > 0 ? o.steps : default_steps(task);
    const int64_t baseline_steps = o.baseline_steps > 0 ? o.baseline_steps : std::min(steps, kBaselineSteps);

    // A sample sequence from the digits of pi: 31415926|62951413 for reverse.
    std::vector<int64_t> sample = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3};
    sample.resize(static_cast<size_t>(L));
    std::vector<int64_t> sample_answer = answer(task, sample);
    std::cout << "== " << task_name(task) << ": " << L << " digits, e.g. " << to_text(sample) << "|"
              << to_text(sample_answer) << " ==\n";
    std::cout << "evaluation: " << o.eval_size << " random prompts (seed " << kEvalSeed
              << "), kept out of training; greedy decoding, an answer counts if every digit is right\n";

    // The attention model.
    manual_seed(o.seed);
    auto gpt = make_model(attention_model(o)); // gpt.py's GPT, run by the fast model
    std::cout << "attention model: gpt.py's GPT (the fast model), n_layer=" << o.n_layer << " n_head=" << o.n_head
              << " n_embd=" << o.n_embd << " block_size=" << T << ", " << gpt->num_parameters() << " parameters; "
              << steps << " steps of " << o.batch_size << " sequences, AdamW lr " << format("%g", o.lr) << "\n";
    Outcome with = train_and_evaluate(*gpt, task, o, steps, eval_prompts, held_out);

    // The baseline: the same model without attention, on the same batches.
    manual_seed(o.seed);
    NoAttentionLM mlp(kTaskVocab, T, o.n_embd, o.n_layer);
    std::cout << "baseline: no attention (same embeddings, MLPs and head), " << mlp.num_parameters() << " parameters; "
              << baseline_steps << " steps"
              << (o.baseline_steps == 0 && baseline_steps < steps
                      ? " (fewer: its loss plateaus early, as the lines below show)"
                      : "")
              << "\n";
    Outcome without = train_and_evaluate(mlp, task, o, baseline_steps, eval_prompts, held_out);

    std::cout << "examples (prompt|expected -> attention model, baseline):\n";
    for (int64_t n = 0; n < std::min<int64_t>(3, o.eval_size); ++n) {
        Tensor p = eval_prompts[n].contiguous();
        std::vector<int64_t> prompt(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + L);
        std::vector<int64_t> want = answer(task, prompt);
        std::string a = row_text(with.decoded, n), b = row_text(without.decoded, n);
        std::cout << "  " << to_text(prompt) << "|" << to_text(want) << " -> " << a
                  << (a == to_text(want) ? " ok" : " WRONG") << ", " << b << (b == to_text(want) ? " ok" : " wrong")
                  << "\n";
    }
    std::cout << "\n";
    return {with.accuracy.exact, without.accuracy.exact};
}

int run(int argc, char** argv) {
    Options o;
    if (!parse_options(argc, argv, o)) return 0;
    if (o.threads > 0) set_num_threads(o.threads);
    // The attention model is the larger of the two: refuse it before
    // allocating if it cannot fit.
    std::string too_large = memory_problem(estimate_memory(attention_model(o), o.batch_size, 0), available_memory(),
                                           "--n-embd, --n-layer or --batch-size");
    if (!too_large.empty()) throw UsageError(too_large);
    auto start = std::chrono::steady_clock::now();
    const EvalSet eval = make_eval_set(o);
    std::cout << "train_tasks: " << get_num_threads() << (get_num_threads() == 1 ? " thread" : " threads") << ", seed "
              << o.seed << "\n\n";
    std::string attention, baseline;
    for (Task task : o.tasks) {
        TaskResult r = run_task(task, o, eval);
        attention += std::string(" ") + task_name(task) + "=" + format("%.3f", r.attention);
        baseline += std::string(" baseline_") + task_name(task) + "=" + format("%.3f", r.baseline);
    }
    std::cout << "final:" << attention << baseline << " length=" << o.length << " seed=" << o.seed
              << format(" seconds=%.1f", seconds_since(start)) << "\n";
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "train_tasks: %s\nrun train_tasks --help for the options\n", e.what());
        return 2;
    } catch (const DivergedError& e) {
        std::fprintf(stderr, "train_tasks: %s\n", e.what());
        return 3;
    } catch (const OutOfMemoryError& e) {
        // The estimate passed, but the machine (or a limit such as ulimit -v) gave less.
        std::fprintf(stderr, "train_tasks: %s\nuse a smaller --n-embd, --n-layer or --batch-size\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "train_tasks: internal error: %s\n", e.what());
        return 1;
    }
}
