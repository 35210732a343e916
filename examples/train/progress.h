// What train_gpt shows while it trains. On a terminal: one line redrawn in
// place, with a bar, the step, the loss, tokens per second and the time left.
// Otherwise (a pipe, a log file): a plain line every so many steps. Other
// output (evaluation lines) goes through message(), which keeps the bar
// below it. Also the printf-style helper train_gpt formats its lines with.
// No tests of its own: tests/test_train_gpt.cpp runs it end to end.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "../flags.h"

namespace train {

class Progress {
public:
    // Steps are numbered up to total_steps - 1; each processes tokens_per_step tokens.
    Progress(int64_t total_steps, int64_t tokens_per_step, bool terminal, int64_t log_every);
    // After step `step` (its loss, and the seconds the step took).
    void step(int64_t step, double loss, double seconds);
    // A line of its own, above the bar.
    void message(const std::string& line);
    // Clears the bar at the end.
    void finish();
    // Training tokens per second so far (steps only, not evaluation).
    double tokens_per_second() const;

private:
    void draw(int64_t step, double loss);

    int64_t total_steps_, tokens_per_step_;
    bool terminal_;
    int64_t log_every_;
    double step_seconds_ = 0;
    int64_t steps_done_ = 0;
    bool bar_shown_ = false;
    std::chrono::steady_clock::time_point last_draw_{};
};

// "1:23", "12:03:45": a duration for humans.
std::string clock_time(double seconds);

// printf into a string: format("%.4f", loss).
using flags::format;

// "step 100: train loss 2.4512, val loss 2.4877": an estimate_loss result.
std::string eval_line(int64_t step, double train_loss, double val_loss);

} // namespace train
