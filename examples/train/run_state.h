// Everything a train_gpt run needs to stop and continue exactly where it
// was: the model's and the optimiser's state, the random generator's state,
// the loss history, the settings and the vocabulary, in one safetensors file
// (nn::save_safetensors, so it is written atomically and checked on load).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <ember.h>

#include "data.h"
#include "options.h"

namespace train {

struct EvalRecord {
    int64_t step;
    double train_loss, val_loss;
};

struct RunState {
    Options options; // the settings the run was started with
    Vocab vocab;
    uint64_t data_fingerprint = 0;
    std::string data_name; // the --data path, or "(generated play)"
    int64_t next_step = 0; // the first step still to run
    std::vector<double> step_losses;
    std::vector<EvalRecord> evals;
    // The lowest val loss the run's evaluations found, the final ones
    // included, and its step (-1: none yet): what --divergence-ratio
    // compares with.
    double best_val = INFINITY;
    int64_t best_step = -1;
    // What OUT's best checkpoint held when this state was saved: its step
    // (-1: none) and val loss.
    int64_t best_file_step = -1;
    double best_file_val = INFINITY;
};

// Writes model, optimiser and generator state (`rng_state`, else the
// default generator's now) with the run state to `path`, atomically
// (nn::save_safetensors: a SafetensorsError if it cannot, the old file
// intact). Throws DivergedError (guard.h), writing nothing, if the model or
// the optimiser holds a NaN or an infinity: a checkpoint is always a good one.
void save_run(const std::string& path, const RunState& run, const ember::nn::Module& model,
              const ember::optim::Optimizer& optimizer, const std::vector<uint8_t>& rng_state);
void save_run(const std::string& path, const RunState& run, const ember::nn::Module& model,
              const ember::optim::Optimizer& optimizer);

// Reads a checkpoint's run state (settings, vocabulary, histories). Throws
// ember::nn::SafetensorsError if the file is not a train_gpt checkpoint.
RunState read_run(const std::string& path);

// Restores model, optimiser and default-generator state from the checkpoint.
// The model and optimiser must have been built from read_run's settings.
void restore_run(const std::string& path, ember::nn::Module& model, ember::optim::Optimizer* optimizer);

} // namespace train
