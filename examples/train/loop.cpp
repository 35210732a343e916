// The named steps of train_gpt's loop: see loop.h.
#include "loop.h"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "evaluate.h"
#include "guard.h"
#include "results.h"

namespace train {

using namespace ember;

namespace {

// Rank 0 writes the run's state to `path`; false (and a message) if the
// write failed (a full disk, a folder made read-only: the old file stays).
bool write_state(const Session& s, const std::string& path, const std::vector<uint8_t>& rng_state) {
    if (distributed::get_rank() != 0) return true;
    try {
        save_run(path, s.run, *s.model, *s.optimizer, rng_state);
        return true;
    } catch (const nn::SafetensorsError& e) {
        std::fprintf(stderr, "train_gpt: could not save the checkpoint of step %lld: %s\n",
                     static_cast<long long>(s.run.next_step), e.what());
        return false;
    }
}

} // namespace

bool save_best(Session& s, const std::vector<uint8_t>& rng_state) {
    RunState& run = s.run;
    const int64_t held_step = run.best_file_step;
    const double held_val = run.best_file_val;
    run.best_file_step = run.next_step, run.best_file_val = run.best_val; // what the file will say it holds
    if (!write_state(s, s.best_checkpoint, rng_state)) {
        run.best_file_step = held_step, run.best_file_val = held_val;
        return false;
    }
    s.stale_best = false;
    return true;
}

bool save(Session& s, const std::vector<uint8_t>& rng_state) {
    if (!write_state(s, s.checkpoint, rng_state)) return false;
    s.saved_step = s.run.next_step;
    if (s.stale_best) { // an earlier run's best checkpoint (--overwrite) must not pass for this run's
        std::error_code ignored;
        if (distributed::get_rank() == 0) std::filesystem::remove(s.best_checkpoint, ignored);
        s.stale_best = false;
    }
    return true;
}

namespace {

// When the last save of a run failed: what is kept, and status 4.
int unsaved_end(const Session& s) {
    if (distributed::get_rank() == 0)
        std::fprintf(stderr, "train_gpt: the run's last state could not be saved; %s\n",
                     s.saved_step >= 0 ? (s.checkpoint + " holds step " + std::to_string(s.saved_step)).c_str()
                                       : "no checkpoint of this run was written");
    return 4;
}

// When a result file (losses.csv, a picture, the sample) cannot be
// written at the end (a full disk): what happened, and status 4. The
// checkpoint was saved before.
int unwritten_results(const Session& s, const std::exception& e) {
    std::fprintf(stderr, "train_gpt: %s; the checkpoint %s is saved (step %lld)\n", e.what(), s.checkpoint.c_str(),
                 static_cast<long long>(s.saved_step));
    return 4;
}

} // namespace

int evaluate(Session& s, int64_t step, int64_t first_step, Progress& progress, EvalRecord* estimate) {
    const Options& o = s.run.options;
    // The generator as the steps left it: the estimate draws its batches
    // from it, and a run resumed from this state draws them again.
    const std::vector<uint8_t> rng_state = default_generator().get_state();
    const auto losses = estimate_loss(*s.model, s.data, o);
    if (interrupted_everywhere()) return stop_interrupted(s, first_step, progress, rng_state);
    const auto [train_loss, val_loss] = *losses;
    progress.message(eval_line(step, train_loss, val_loss));
    // NaN compares false: a val loss that is not a number stops the run too.
    if (!(val_loss <= o.divergence_ratio * s.run.best_val)) {
        progress.finish();
        return stop_val_rising(s, step, first_step, val_loss);
    }
    // The best checkpoint first, so that the latest one's record of it is
    // true. A fresh run's step 0 is the untrained model: no file for it.
    if (val_loss < s.run.best_val) {
        s.run.best_val = val_loss, s.run.best_step = step;
        if (step > 0) save_best(s, rng_state);
    }
    // The state of the first step is on disk already (resumed), or is the untrained model.
    if (step > first_step && !save(s, rng_state) && step == o.max_iters) return unsaved_end(s);
    if (estimate) *estimate = {step, train_loss, val_loss};
    else s.run.evals.push_back({step, train_loss, val_loss});
    return 0;
}

namespace {

// Note [dropout over ranks]
// One process draws each dropout mask for all B rows from the default
// generator, between the draws of the batches. A rank could reproduce the
// masks of its rows only by drawing (and throwing away) those of every other
// row. So under mpirun, with dropout > 0, each rank draws its masks from a
// stream of its own, seeded from (seed, step, rank), and the default
// generator, which draws the batches, is put back after the forward: the
// batches stay the same on every rank and the masks differ between ranks,
// as they must (equal masks would drop the same units in every share).
// That is a different, equally valid draw of the masks than one process's:
// N ranks follow one process's training, to rounding, with dropout 0 (the
// default preset; the lecture preset has 0.2). With one process nothing changes.
uint64_t dropout_seed(uint64_t seed, int64_t step, int rank) {
    // splitmix64's mixing of the three, so that nearby steps and ranks get unrelated streams.
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step) * 0xBF58476D1CE4E5B9ull +
                 static_cast<uint64_t>(rank) * 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

} // namespace

Tensor share_loss(nn::Module& model, const Tensor& xb, const Tensor& yb, const Options& o, int64_t step) {
    std::optional<Generator> batch_stream; // Note [dropout over ranks]
    if (distributed::get_world_size() > 1 && o.model.dropout > 0) {
        batch_stream = default_generator();
        default_generator().manual_seed(dropout_seed(o.seed, step, distributed::get_rank()));
    }
    Tensor logits = model.forward(xb); // (B/N,T,V)
    Tensor loss = cross_entropy(logits.view({-1, logits.size(-1)}), yb.reshape({-1}));
    if (batch_stream) default_generator() = *batch_stream;
    return loss;
}

double exchange_gradients(nn::Module& model, const Tensor& loss, double& seconds) {
    // The batch's mean loss is the mean of the ranks' equal shares' mean
    // losses, so its gradient is the mean of theirs (one process: as is).
    const auto start = std::chrono::steady_clock::now();
    distributed::all_reduce_gradients(model.parameters());
    const double batch_loss = distributed::all_reduce_mean(loss.item());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return batch_loss;
}

void record_step(Session& s, int64_t step, double loss, std::chrono::steady_clock::time_point started,
                 Progress& progress) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    s.run.step_losses.push_back(loss);
    s.run.next_step = step + 1;
    progress.step(step, loss, seconds); // tokens/s of the whole batch: all ranks'
}

bool interrupted_everywhere() { return distributed::all_reduce_mean(interrupt_requested() ? 1.0 : 0.0) > 0; }

int stop_interrupted(Session& s, int64_t first_step, Progress& progress, const std::vector<uint8_t>& rng_state) {
    progress.finish();
    // Under mpirun a rank may stop for another's signal: 130, as for Ctrl-C.
    const int signal = interrupt_signal() != 0 ? interrupt_signal() : SIGINT;
    const int status = 128 + signal;
    const std::string what =
        std::string(signal_name(signal)) +
        (s.run.next_step == 0 ? " before the first step" : " after step " + std::to_string(s.run.next_step - 1));
    if (s.run.next_step == first_step) { // nothing done since the checkpoint there is (or the untrained start)
        std::cout << "stopped by " << what << "; nothing new to save"
                  << (first_step > 0 ? ": " + s.run.options.resume + " is unchanged" : std::string()) << "\n";
        return status;
    }
    if (!save(s, rng_state)) return unsaved_end(s);
    // Stopped in the final evaluation, every step done: a resumed run must train longer.
    const Options& o = s.run.options;
    const std::string longer =
        s.run.next_step >= o.max_iters ? " --max-iters " + std::to_string(o.max_iters + o.eval_interval) : "";
    std::cout << "stopped by " << what << "; checkpoint saved to " << s.checkpoint
              << "\nresume with: train_gpt --resume " << s.checkpoint << longer << "\n";
    return status;
}

int finish_run(Session& s, Progress& progress, int64_t first_step, double exchange_seconds) {
    const Options& o = s.run.options;
    progress.finish();
    // The final estimate is an evaluation like the others: it may stop a
    // run whose loss rose, and saves before anything else is written.
    EvalRecord final_estimate{};
    if (const int stop = evaluate(s, o.max_iters, first_step, progress, &final_estimate); stop != 0) return stop;
    const bool writer = distributed::get_rank() == 0;
    try {
        if (writer) write_losses_csv(o.out_dir + "/losses.csv", s.run);
    } catch (const std::runtime_error& e) {
        return unwritten_results(s, e);
    }
    if (const int world = distributed::get_world_size(); world > 1) {
        // What the ranks exchanged: every gradient, as float32, each step (docs/distributed.md).
        const double steps = static_cast<double>(o.max_iters - first_step);
        const double bytes = 4.0 * static_cast<double>(s.model->num_parameters());
        std::cout << format("all-reduce: %.2f ms per step, of %.2f MB of gradients; each rank sent %.2f MB a step\n",
                            1e3 * exchange_seconds / steps, bytes / 1e6, 2.0 * (world - 1) / world * bytes / 1e6);
    }
    try {
        if (writer) write_results(s, final_estimate.train_loss, final_estimate.val_loss, progress.tokens_per_second());
    } catch (const std::runtime_error& e) {
        return unwritten_results(s, e);
    }
    return 0;
}

} // namespace train
