// train_gpt's command line: presets for the lecture's stages, a flag for
// every hyperparameter, and the paths. Bad flags are a UsageError, which
// train_gpt reports with its usage and exit status 2.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <set>
#include <stdexcept>
#include <string>

#include "../flags.h"
#include "model.h"

namespace train {

using UsageError = flags::UsageError;

struct Options {
    std::string preset = "default";
    std::string data_path; // empty: the generated default corpus
    std::string tokenizer; // empty: the text's characters; else --tokenizer's name (data.h)
    ModelConfig model;     // stage and sizes (vocab_size comes from the data)
    int64_t batch_size = 32;
    double lr = 1e-3;
    // nanoGPT's schedule (learning_rate_at): a linear warm-up over
    // warmup_iters steps, then a cosine from lr down to min_lr at
    // lr_decay_iters (0: no decay, lr after the warm-up).
    int64_t warmup_iters = 0;
    int64_t lr_decay_iters = 0;
    double min_lr = NAN; // NaN: lr / 10, nanoGPT's advice
    // AdamW's (PyTorch's defaults, which gpt.py uses); the decay applies to every parameter.
    double beta1 = 0.9, beta2 = 0.999, weight_decay = 1e-2;
    int64_t grad_accum = 1; // micro-batches of batch_size summed into one step (nanoGPT's gradient_accumulation_steps)
    double max_grad_norm = INFINITY; // clip the gradients' global norm to this (infinity: no clipping)
    double divergence_ratio = 2;     // stop when the val loss exceeds this times its lowest so far
    int64_t max_iters = 1000;
    int64_t eval_interval = 100;
    int64_t eval_iters = 20;
    uint64_t seed = 1337;
    int threads = 0; // 0: OpenMP's default
    std::string out_dir = "out";
    std::string resume;      // checkpoint to continue from
    std::string sample_only; // checkpoint to sample from, without training
    int64_t sample_tokens = 500;
    double temperature = 1.0;
    int64_t top_k = 0; // 0: no top-k
    uint64_t sample_seed = 42;
    std::string attention_map;   // SVG to write, if set
    std::string prompt;          // for the attention map (default: a whole line of the validation text)
    bool summary = false;        // print the model's summary and exit, without training
    bool overwrite = false;      // a new run may replace the checkpoint in out_dir
    bool diagnostics = false;    // write the activation, gradient and update pictures (diagnostics.h)
    std::set<std::string> given; // the flags given on the command line
};

// The smallest --temperature: logits divided by less may overflow float32.
inline constexpr double kMinTemperature = 1e-6;

// The learning rate of step `step` (counted from 0), as nanoGPT's train.py
// computes it in get_lr: lr * (step + 1) / (warmup_iters + 1) during the
// warm-up; after lr_decay_iters, min_lr; between, a cosine from lr to min_lr.
inline double learning_rate_at(const Options& o, int64_t step) {
    const double min_lr = std::isnan(o.min_lr) ? o.lr / 10 : o.min_lr;
    if (step < o.warmup_iters)
        return o.lr * (static_cast<double>(step) + 1) / (static_cast<double>(o.warmup_iters) + 1);
    if (o.lr_decay_iters == 0) return o.lr;
    if (step > o.lr_decay_iters) return min_lr;
    const double ratio =
        static_cast<double>(step - o.warmup_iters) / static_cast<double>(o.lr_decay_iters - o.warmup_iters);
    return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (o.lr - min_lr);
}

// Parses argv; throws UsageError with a message naming the bad flag (an
// unknown flag is named before any value is taken for it).
// Returns false if --help was asked for (the usage was printed).
bool parse_options(int argc, char** argv, Options& options);

// Sets the option of `flag` ("--n-embd") from `value` ("64"), checked
// exactly as on the command line: a UsageError names the flag and its range.
// read_run takes a checkpoint's settings through it.
void set_option(Options& o, const std::string& flag, const std::string& value);

// The checks between options (--n-embd divisible by --n-head, --model only
// for the gpt stage); a UsageError. parse_options and read_run call it.
void check_options(const Options& o);

std::string usage();

} // namespace train
