// The named steps of train_gpt's loop: see loop.h.
#include "loop.h"

#include <iostream>
#include <optional>

#include "evaluate.h"
#include "guard.h"
#include "results.h"

namespace train {

using namespace ember;

void save(const Session& s) {
    if (distributed::get_rank() == 0) save_run(s.checkpoint, s.run, *s.model, *s.optimizer);
}

void evaluate(Session& s, int64_t step, int64_t first_step, Progress& progress) {
    if (step > first_step) save(s);
    auto [train_loss, val_loss] = estimate_loss(*s.model, s.data, s.run.options);
    s.run.evals.push_back({step, train_loss, val_loss});
    progress.message(eval_line(step, train_loss, val_loss));
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

int stop_interrupted(const Session& s, int64_t step, Progress& progress) {
    progress.finish();
    save(s);
    std::cout << "interrupted after step " << step << "; checkpoint saved to " << s.checkpoint
              << "\nresume with: train_gpt --resume " << s.checkpoint << "\n";
    return 130;
}

int finish_run(Session& s, Progress& progress, int64_t first_step, double exchange_seconds) {
    const Options& o = s.run.options;
    progress.finish();
    // Save first: the final estimate draws batches that must not be part of
    // the saved stream (a resumed run would otherwise diverge).
    save(s);
    const bool writer = distributed::get_rank() == 0;
    if (writer) write_losses_csv(o.out_dir + "/losses.csv", s.run);
    auto [final_train, final_val] = estimate_loss(*s.model, s.data, o);
    progress.message(eval_line(o.max_iters, final_train, final_val));
    if (const int world = distributed::get_world_size(); world > 1) {
        // What the ranks exchanged: every gradient, as float32, each step (docs/distributed.md).
        const double steps = static_cast<double>(o.max_iters - first_step);
        const double bytes = 4.0 * static_cast<double>(s.model->num_parameters());
        std::cout << format("all-reduce: %.2f ms per step, of %.2f MB of gradients; each rank sent %.2f MB a step\n",
                            1e3 * exchange_seconds / steps, bytes / 1e6, 2.0 * (world - 1) / world * bytes / 1e6);
    }
    if (writer) write_results(s, final_train, final_val, progress.tokens_per_second());
    return 0;
}

} // namespace train
