// A train_gpt run up to its first step: the settings (the flags, or on
// --resume the checkpoint's with the flags that may change), the text (read,
// checked against the checkpoint, split 90/10), the model and AdamW (restored
// on --resume), and the header it prints (data, model, expected starting
// loss). Problems with the user's data are an InputError, bad flags a
// UsageError: train_gpt exits with status 2 for both. Tests:
// tests/test_train_gpt.cpp (resume, errors); docs: docs/training.md.
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include <ember.h>

#include "data.h"
#include "options.h"
#include "outputs.h"
#include "run_state.h"

namespace train {

struct Session {
    RunState run; // the settings (run.options), vocabulary and losses so far
    Splits data;  // the encoded text: 90% train, 10% val
    std::shared_ptr<ember::nn::Module> model;
    std::unique_ptr<ember::optim::AdamW> optimizer;
    std::string checkpoint;        // OUT/train_gpt.safetensors: the latest state, saved at each evaluation
    std::string best_checkpoint;   // OUT/train_gpt.best.safetensors: the state of the lowest val loss so far
    FolderLock lock;               // --out is this run's until it ends (outputs.h; rank 0's)
    int64_t saved_step = -1;       // the step the latest checkpoint holds (-1: none yet)
    bool stale_best = false;       // OUT's best checkpoint is an earlier run's (--overwrite): removed at the first save
    std::string diagnostics_files; // what --diagnostics wrote (diagnostics.h), listed with the other files
    // (The best val loss so far, and what the best checkpoint holds, are in
    // `run`: a resumed run reads them from its checkpoint.)
};

// The checkpoints' file names in --out.
inline constexpr const char* kCheckpointName = "train_gpt.safetensors";
inline constexpr const char* kBestCheckpointName = "train_gpt.best.safetensors";

// Everything before the first step, in this order: settings, data and its
// checks, the memory the run needs against what the machine has (memory.h),
// manual_seed(seed), model and optimiser, the output directory, the header.
// Throws InputError, UsageError (also when a resumed run has no steps left,
// or would not fit in memory, or under mpirun -np N when the batch size is
// not divisible by N) or ember::nn::SafetensorsError. Every rank of an
// mpirun builds the same session (reading the same data and checkpoint
// files); the weights are then broadcast from rank 0.
Session start_session(Options o);

} // namespace train
