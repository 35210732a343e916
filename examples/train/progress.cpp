// The progress display: see progress.h.
#include "progress.h"

#include <cmath>
#include <cstdio>

namespace train {

std::string clock_time(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    auto s = static_cast<int64_t>(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                      static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
    else std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
    return buf;
}

std::string eval_line(int64_t step, double train_loss, double val_loss) {
    return format("step %.0f: train loss %.4f, val loss %.4f", static_cast<double>(step), train_loss, val_loss);
}

Progress::Progress(int64_t total_steps, int64_t tokens_per_step, bool terminal, int64_t log_every)
    : total_steps_(total_steps), tokens_per_step_(tokens_per_step), terminal_(terminal),
      log_every_(log_every > 0 ? log_every : 1) {}

double Progress::tokens_per_second() const {
    return step_seconds_ > 0 ? static_cast<double>(steps_done_ * tokens_per_step_) / step_seconds_ : 0.0;
}

void Progress::step(int64_t step, double loss, double seconds) {
    step_seconds_ += seconds;
    ++steps_done_;
    if (terminal_) {
        // Redraw at most ten times a second, and always on the last step.
        auto now = std::chrono::steady_clock::now();
        if (now - last_draw_ > std::chrono::milliseconds(100) || step + 1 == total_steps_) {
            draw(step, loss);
            last_draw_ = now;
        }
    } else if ((step + 1) % log_every_ == 0 || step + 1 == total_steps_) {
        double eta = step_seconds_ / static_cast<double>(steps_done_) * static_cast<double>(total_steps_ - step - 1);
        std::printf("step %lld/%lld: loss %.4f, %.0f tokens/s, eta %s\n", static_cast<long long>(step + 1),
                    static_cast<long long>(total_steps_), loss, tokens_per_second(), clock_time(eta).c_str());
        std::fflush(stdout);
    }
}

void Progress::draw(int64_t step, double loss) {
    const int width = 24;
    double done = static_cast<double>(step + 1) / static_cast<double>(total_steps_);
    int filled = static_cast<int>(done * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar += std::string(static_cast<size_t>(width - filled), '.');
    double eta = step_seconds_ / static_cast<double>(steps_done_) * static_cast<double>(total_steps_ - step - 1);
    // \r returns to the start of the line; \033[K erases what a longer previous line left.
    std::printf("\r\033[K[%s] %3.0f%%  step %lld/%lld  loss %.4f  %.0f tok/s  ETA %s", bar.c_str(), 100 * done,
                static_cast<long long>(step + 1), static_cast<long long>(total_steps_), loss, tokens_per_second(),
                clock_time(eta).c_str());
    std::fflush(stdout);
    bar_shown_ = true;
}

void Progress::message(const std::string& line) {
    if (terminal_ && bar_shown_) std::printf("\r\033[K");
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    bar_shown_ = false;
}

void Progress::finish() {
    if (terminal_ && bar_shown_) std::printf("\r\033[K");
    std::fflush(stdout);
    bar_shown_ = false;
}

} // namespace train
