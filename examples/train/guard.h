// What stops a training run before it loses work: a step whose loss or
// gradient norm is no longer finite ends the run (exit status 3) with a
// message saying what happened, why it usually happens and what to try; and
// no checkpoint is ever written from weights that hold NaN or infinity; and
// Ctrl-C stops a run only once its checkpoint is saved.
// Used by train_gpt and train_tasks; tests: tests/test_train_gpt.cpp and
// tests/test_train_tasks.cpp; docs: docs/training.md ("When training diverges").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <ember.h>

namespace train {

// A run stopped because its numbers stopped being finite: exit status 3.
class DivergedError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The largest gradient norm a float32 step can take: AdamW squares every
// gradient element, and a square past float32's largest value (3.4e38)
// puts an infinity in its state, which no later step removes.
inline constexpr double kLargestGradNorm = 1.8e19;

// True when a step may go on: its loss and its gradient norm are finite,
// and the gradient it applies (clipped to max_grad_norm, if that is finite)
// is below kLargestGradNorm.
inline bool finite_step(double loss, double grad_norm, double max_grad_norm) {
    return std::isfinite(loss) && std::isfinite(grad_norm) && std::min(grad_norm, max_grad_norm) < kLargestGradNorm;
}

// What to tell the user when step `step` had a loss or gradient norm that
// is not finite: the values, the likely cause (the learning rate `lr`) and
// what to try (a lower --lr, or --max-grad-norm, unless it is set already:
// `max_grad_norm` is infinity when off).
std::string divergence_message(int64_t step, double loss, double grad_norm, double lr, double max_grad_norm);

// Ctrl-C, and the signals a system sends to stop a program: after
// catch_interrupts(), SIGINT, SIGTERM (kill, a shutdown), SIGHUP (a closed
// terminal) and SIGUSR1 (which mpirun forwards to every rank without
// killing them: docs/distributed.md) only set a flag, which
// interrupt_requested() reads; the loop (and an evaluation under way) stops
// at the next batch, saves a checkpoint and exits with 128 + the signal's
// number (130 for Ctrl-C). The same signal a second time before that ends
// the process at once, without saving. On Windows the signals are SIGINT
// (Ctrl-C), SIGBREAK (Ctrl-Break, named "Ctrl-Break (SIGBREAK)") and SIGTERM.
void catch_interrupts();
bool interrupt_requested();
int interrupt_signal();              // the first signal received, or 0
const char* signal_name(int signal); // "Ctrl-C (SIGINT)", "SIGTERM", "SIGHUP", "SIGUSR1"

// Throws DivergedError naming the first tensor of `state` that holds a NaN
// or an infinity, and `what` the state is for ("the checkpoint").
void require_finite(const ember::nn::StateDict& state, const std::string& what);

} // namespace train
