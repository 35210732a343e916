// The steps of train_gpt's loop (examples/train_gpt.cpp) that take more
// than one line, each named for what it does: evaluate (and save before
// it), the loss of this process's share of the batch, the exchange that
// averages the gradients over the processes mpirun started
// (docs/distributed.md), the record of a step, the stop after Ctrl-C, and
// the end of a run. With one process the share is the whole batch and the
// exchange changes nothing. Tests: tests/test_train_gpt.cpp,
// tests/test_distributed.cpp.
#pragma once

#include <chrono>
#include <cstdint>

#include <ember.h>

#include "progress.h"
#include "session.h"

namespace train {

// Rank 0 writes the run's checkpoint (the other ranks hold the same state).
void save(const Session& s);

// The lecture's estimate of the train and val losses at `step`, recorded in
// the run and printed; before it, after the run's first step
// (`first_step`), the checkpoint is saved.
void evaluate(Session& s, int64_t step, int64_t first_step, Progress& progress);

// The mean loss of this rank's share of the step's batch (xb, yb: (B/N,T)),
// with its graph. Under mpirun with dropout, this rank's masks come from a
// stream of its own (loop.cpp, Note [dropout over ranks]).
ember::Tensor share_loss(ember::nn::Module& model, const ember::Tensor& xb, const ember::Tensor& yb, const Options& o,
                         int64_t step);

// Averages every gradient and the loss over the ranks, in place, so that all
// of them step alike; returns the whole batch's mean loss. Adds the time it
// took to `seconds`.
double exchange_gradients(ember::nn::Module& model, const ember::Tensor& loss, double& seconds);

// After a step: its loss in the run's history, the progress bar.
void record_step(Session& s, int64_t step, double loss, std::chrono::steady_clock::time_point started,
                 Progress& progress);

// Whether Ctrl-C reached any rank: all of them stop at the same step.
bool interrupted_everywhere();

// After Ctrl-C: saves the checkpoint, says how to resume; returns 130.
int stop_interrupted(const Session& s, int64_t step, Progress& progress);

// After the last step: saves, writes the losses, the final estimate, the
// results and (under mpirun) the exchange's cost. Returns 0.
int finish_run(Session& s, Progress& progress, int64_t first_step, double exchange_seconds);

} // namespace train
