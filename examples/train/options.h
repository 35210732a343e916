// train_gpt's command line: presets for the lecture's stages, a flag for
// every hyperparameter, and the paths. Bad flags are a UsageError, which
// train_gpt reports with its usage and exit status 2.
#pragma once

#include <cmath>
#include <cstdint>
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
    ModelConfig model;     // stage and sizes (vocab_size comes from the data)
    int64_t batch_size = 32;
    double lr = 1e-3;
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
    std::set<std::string> given; // the flags given on the command line
};

// The smallest --temperature: logits divided by less may overflow float32.
inline constexpr double kMinTemperature = 1e-6;

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
