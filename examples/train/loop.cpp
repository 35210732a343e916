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

bool save(Session& s, const std::vector<uint8_t>& rng_state, bool best) {
    bool saved = true;
    if (distributed::get_rank() == 0) {
        for (const std::string& path : {s.checkpoint, s.best_checkpoint}) {
            if (path == s.best_checkpoint && !best) break;
            try {
                save_run(path, s.run, *s.model, *s.optimizer, rng_state);
            } catch (const nn::SafetensorsError& e) {
                // A full disk, a folder made read-only: tell, keep the old file, go on.
                std::fprintf(stderr, "train_gpt: could not save the checkpoint of step %lld: %s\n",
                             static_cast<long long>(s.run.next_step), e.what());
                saved = false;
                break;
            }
        }
    }
    if (saved) s.saved_step = s.run.next_step;
    if (saved && s.stale_best && !best) {
        std::error_code ignored; // a best checkpoint that stays would only be an earlier run's
        std::filesystem::remove(s.best_checkpoint, ignored);
    }
    if (saved) s.stale_best = false;
    return saved;
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
    if (!(val_loss <= o.divergence_ratio * s.best_val)) {
        progress.finish();
        return stop_val_rising(s, step, first_step, val_loss);
    }
    const bool best = val_loss < s.best_val;
    if (best) s.best_val = val_loss, s.best_step = step;
    // The state of the first step is on disk already (resumed), or is the untrained model.
    if (step > first_step && !save(s, rng_state, best) && step == o.max_iters) return unsaved_end(s);
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
    const std::string what = std::string(signal_name(signal)) + " after step " + std::to_string(s.run.next_step - 1);
    if (s.run.next_step == first_step) { // nothing done since the checkpoint there is (or the untrained start)
        std::cout << "stopped by " << what << "; nothing new to save"
                  << (first_step > 0 ? ": " + s.run.options.resume + " is unchanged" : std::string()) << "\n";
        return status;
    }
    if (!save(s, rng_state, false)) return unsaved_end(s);
    std::cout << "stopped by " << what << "; checkpoint saved to " << s.checkpoint
              << "\nresume with: train_gpt --resume " << s.checkpoint << "\n";
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
