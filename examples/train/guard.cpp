// Stopping a run that diverged, and keeping NaN out of checkpoints: see guard.h.
#include "guard.h"

#include <atomic>
#include <csignal>
#include <limits>

#include "progress.h"

namespace train {

using namespace ember;

namespace {

// "nan", "inf" or "2.79e+17" (printf may write "-nan").
std::string number(double v) { return std::isnan(v) ? "nan" : format("%g", v); }

// The signal that asked the run to stop, or 0. A signal handler may only
// touch a lock-free atomic of static storage (and call async-signal-safe
// functions: signal, raise).
std::atomic<int> stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int signal) {
    // The first signal is the request, kept. The same signal a second time
    // while it is being handled (a save to a slow disk, a long evaluation)
    // ends the process at once, as if uncaught; another signal is the same
    // request again (mpirun follows the terminal's SIGINT with a SIGTERM).
    int first = 0;
    if (!stop_signal.compare_exchange_strong(first, signal) && first == signal) {
        std::signal(signal, SIG_DFL);
        std::raise(signal);
    }
}

// The signals that ask a run to stop. Windows has no SIGHUP or SIGUSR1 (and
// no mpirun); Ctrl-Break is its SIGBREAK, and its C runtime calls the
// handler of Ctrl-C and Ctrl-Break on a thread of their own.
#ifdef _WIN32
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGBREAK};
#else
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
#endif

// True if the run was started ignoring `signal`: nohup's SIGHUP, a
// background job's SIGINT. Windows starts no program ignoring a signal.
bool ignored_at_start(int signal) {
#ifdef _WIN32
    (void)signal;
    return false;
#else
    struct sigaction current {};
    return sigaction(signal, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
#endif
}

} // namespace

void catch_interrupts() {
    for (int signal : kStopSignals) {
        // A signal the run was started ignoring stays ignored.
        if (ignored_at_start(signal)) continue;
        std::signal(signal, on_stop_signal);
    }
}

bool interrupt_requested() { return stop_signal != 0; }

int interrupt_signal() { return stop_signal; }

const char* signal_name(int signal) {
    if (signal == SIGTERM) return "SIGTERM";
#ifdef _WIN32
    if (signal == SIGBREAK) return "Ctrl-Break (SIGBREAK)";
#else
    if (signal == SIGHUP) return "SIGHUP";
    if (signal == SIGUSR1) return "SIGUSR1";
#endif
    return "Ctrl-C (SIGINT)";
}

std::string divergence_message(int64_t step, double loss, double grad_norm, double lr, double max_grad_norm) {
    std::string text =
        "training diverged at step " + std::to_string(step) + ": the loss is " + number(loss) +
        " and the gradient norm " + number(grad_norm) +
        (std::isfinite(grad_norm) && grad_norm >= kLargestGradNorm && std::isinf(max_grad_norm)
             ? " (AdamW squares each gradient, and past " + number(kLargestGradNorm) + " the squares overflow float32)"
             : "") +
        ". The usual cause is a learning rate too high for the model (--lr " + format("%g", lr) +
        "): one update moved the weights so far that the numbers overflowed. Try a lower --lr (" +
        format("%g", lr / 10) + ", a tenth)";
    if (std::isinf(max_grad_norm)) text += ", or clip the gradients with --max-grad-norm 1";
    else text += "; the gradients were already clipped to norm " + format("%g", max_grad_norm);
    return text + ".";
}

void require_finite(const nn::StateDict& state, const std::string& what) {
    NoGradGuard no_grad;
    for (const auto& [name, t] : state) {
        if (!t.is_floating_point()) continue;
        // NaN and the infinities are the elements whose magnitude is not below infinity.
        if (sum(abs(t) < std::numeric_limits<double>::infinity()).item<int64_t>() != t.numel())
            throw DivergedError("refusing to write " + what + ": " + name + " holds NaN or infinity" +
                                " (the run diverged); the previous file, if any, is unchanged");
    }
}

} // namespace train
