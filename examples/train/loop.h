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
#include <vector>

#include <ember.h>

#include "progress.h"
#include "session.h"

namespace train {

// Rank 0 writes the run's state, with the generator at `rng_state`, to its
// checkpoint (save) or its best checkpoint (save_best, recording in the run
// which step that file holds). A write that fails (a full disk) is reported
// and the run goes on: false, the old file intact, the record unchanged, and
// the next evaluation tries again.
bool save(Session& s, const std::vector<uint8_t>& rng_state);
bool save_best(Session& s, const std::vector<uint8_t>& rng_state);

// The lecture's estimate of the train and val losses at `step`, printed;
// then the best checkpoint saved at a new lowest val loss (but for a fresh
// run's untrained step 0), and, after the run's first step (`first_step`),
// the checkpoint. The estimate is recorded in the
// run, or returned in `estimate` (the final one). Returns 0 to go on, or
// train_gpt's exit status: 3 when the val loss rose above
// --divergence-ratio times its lowest (nothing saved: the checkpoints keep
// the state before), 128 + the signal after Ctrl-C, SIGTERM or SIGHUP
// during the estimate (the state before it saved), 4 if the run's last
// checkpoint could not be written.
int evaluate(Session& s, int64_t step, int64_t first_step, Progress& progress, EvalRecord* estimate = nullptr);

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

// Whether Ctrl-C (SIGTERM, SIGHUP) reached any rank: all stop at the same step.
bool interrupted_everywhere();

// After Ctrl-C, SIGTERM or SIGHUP: saves the state the steps since
// `first_step` reached, with the generator at `rng_state`, says how to
// resume; returns 128 + the signal (130 for Ctrl-C), or 4 if the save failed.
int stop_interrupted(Session& s, int64_t first_step, Progress& progress, const std::vector<uint8_t>& rng_state);

// After the last step: the final estimate (an evaluation, which saves), the
// losses, the results and (under mpirun) the exchange's cost. Returns 0, or
// an exit status as evaluate's.
int finish_run(Session& s, Progress& progress, int64_t first_step, double exchange_seconds);

} // namespace train
