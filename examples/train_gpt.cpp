// train_gpt: trains a character-level GPT and shows it learning: with no
// arguments a small GPT on a generated play, in a few minutes; with --preset
// and --data the "Let's build GPT" lecture's stages on tiny Shakespeare.
// train_loop below is the lecture's loop; examples/train/ holds the rest (settings
// and resume, data, models, checkpoints, progress, the files it writes to out/).
// Its last line is machine-readable: final: step=... train_loss=... val_loss=...
// Twin: examples/train_gpt.py; tests: tests/test_train_gpt.cpp; docs: docs/training.md.
//
//   build/examples/train_gpt [--help]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <unistd.h>

#include <ember.h>

#include "train/data.h"
#include "train/evaluate.h"
#include "train/guard.h"
#include "train/options.h"
#include "train/progress.h"
#include "train/results.h"
#include "train/run_state.h"
#include "train/session.h"

using namespace ember;
using namespace train;

namespace {

// Ctrl-C sets this; the loop saves a checkpoint at the next step boundary.
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }

// Set once the training loop starts: an error after that may be one rank's
// alone (main ends every rank then, see below).
bool training = false;

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

// The mean loss of this rank's share of the step's batch (xb, yb: (B/N,T)), with its graph.
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

// The lecture's loop: a random batch of the 90% training text per step, AdamW,
// and the train and val loss estimated every eval_interval steps. Added: a
// checkpoint before each estimate; the gradient norm (clipped with
// --max-grad-norm), and a stop when it or the loss is not finite; the final
// estimate after the last step and the checkpoint, so that a run stopped at step
// N and resumed draws exactly the batches an uninterrupted run draws.
// Under mpirun -np N (docs/distributed.md) every rank runs this loop on its
// share of each batch, and the gradients are averaged before the step, so
// all ranks hold the same weights; every decision to stop is taken on
// numbers all ranks share, and rank 0 alone prints and writes files.
// Returns the exit status: 0, 130 after Ctrl-C (checkpoint saved), 3 if it diverged.
int train_loop(Session& s) {
    const Options& o = s.run.options;
    nn::Module& model = *s.model;
    optim::AdamW& optimizer = *s.optimizer;
    training = true;
    const bool writer = distributed::get_rank() == 0;
    auto save = [&] {
        if (writer) save_run(s.checkpoint, s.run, model, optimizer);
    };
    std::signal(SIGINT, on_sigint);
    const bool terminal = isatty(fileno(stdout));
    Progress progress(o.max_iters, o.batch_size * o.model.block_size, terminal,
                      std::max<int64_t>(1, o.eval_interval / 5));
    model.train();
    const int64_t first_step = s.run.next_step;
    double exchange_seconds = 0; // in the all-reduce of gradients and loss, over all steps
    for (int64_t step = first_step; step < o.max_iters; ++step) {
        if (step % o.eval_interval == 0) {
            if (step > first_step) save();
            auto [train_loss, val_loss] = estimate_loss(model, s.data, o);
            s.run.evals.push_back({step, train_loss, val_loss});
            progress.message(eval_line(step, train_loss, val_loss));
        }
        auto start = std::chrono::steady_clock::now();
        auto [xb, yb] = get_batch_share(s.data.train, o.batch_size, o.model.block_size); // (B/N,T) each
        Tensor loss = share_loss(model, xb, yb, o, step);
        optimizer.zero_grad();
        loss.backward();
        // The batch's mean loss is the mean of the ranks' equal shares' mean
        // losses, so its gradient is the mean of theirs (one process: as is).
        auto exchange_start = std::chrono::steady_clock::now();
        distributed::all_reduce_gradients(model.parameters());
        const double batch_loss = distributed::all_reduce_mean(loss.item());
        exchange_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_start).count();
        double grad_norm = optim::clip_grad_norm_(model.parameters(), o.max_grad_norm); // infinity: not clipped
        if (!finite_step(batch_loss, grad_norm, o.max_grad_norm)) {
            progress.finish();
            return stop_diverged(s, step, first_step, batch_loss, grad_norm); // keeps the last good checkpoint
        }
        optimizer.step();
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        s.run.step_losses.push_back(batch_loss);
        s.run.next_step = step + 1;
        progress.step(step, s.run.step_losses.back(), seconds); // tokens/s of the whole batch: all ranks'
        // Every rank stops at the same step if any of them was interrupted.
        if (distributed::all_reduce_mean(interrupted ? 1.0 : 0.0) > 0) {
            progress.finish();
            save();
            std::cout << "interrupted after step " << step << "; checkpoint saved to " << s.checkpoint
                      << "\nresume with: train_gpt --resume " << s.checkpoint << "\n";
            return 130;
        }
    }
    progress.finish();

    // Save first: the final estimate draws batches that must not be part of
    // the saved stream (a resumed run would otherwise diverge).
    save();
    if (writer) write_losses_csv(o.out_dir + "/losses.csv", s.run);
    auto [final_train, final_val] = estimate_loss(model, s.data, o);
    progress.message(eval_line(o.max_iters, final_train, final_val));
    if (const int world = distributed::get_world_size(); world > 1) {
        // What the ranks exchanged: every gradient, as float32, each step (docs/distributed.md).
        const double steps = static_cast<double>(o.max_iters - first_step);
        const double bytes = 4.0 * static_cast<double>(model.num_parameters());
        std::cout << format("all-reduce: %.2f ms per step, of %.2f MB of gradients; each rank sent %.2f MB a step\n",
                            1e3 * exchange_seconds / steps, bytes / 1e6, 2.0 * (world - 1) / world * bytes / 1e6);
    }
    if (writer) write_results(s, final_train, final_val, progress.tokens_per_second());
    return 0;
}

int run(int argc, char** argv) {
    Options o;
    if (!parse_options(argc, argv, o)) return 0;
    if (o.threads > 0) set_num_threads(o.threads);
    if (!o.sample_only.empty()) {
        sample_only(o);
        return 0;
    }
    Session s = start_session(o); // prints the header: data, model, expected starting loss
    if (o.summary) {
        // One batch's shape through the model: torchinfo's table (nn/summary.h).
        std::cout << nn::summary(*s.model, zeros({s.run.options.batch_size, s.run.options.model.block_size}, kInt64));
        return 0;
    }
    return train_loop(s);
}

// Runs train_gpt; on an error, its message and exit status.
int run_reporting(int argc, char** argv, std::string& message) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        message = std::string(e.what()) + "\nrun train_gpt --help for the options";
        return 2;
    } catch (const InputError& e) {
        message = e.what();
        return 2;
    } catch (const nn::CheckpointError& e) {
        message = e.what();
        return 2;
    } catch (const DivergedError& e) {
        message = e.what();
        return 3;
    } catch (const OutOfMemoryError& e) {
        // The estimate passed, but the machine (or a limit such as ulimit -v) gave less.
        std::fprintf(stderr, "train_gpt: %s\nuse a smaller --n-embd, --n-layer, --batch-size or --block-size\n",
                     e.what());
        return 2;
    } catch (const std::exception& e) {
        message = std::string("internal error: ") + e.what();
        return 1;
    }
}

} // namespace

int main(int argc, char** argv) {
    // Under mpirun: join the other ranks (MPI); otherwise a world of one process.
    try {
        distributed::init_process_group();
    } catch (const distributed::DistributedError& e) {
        std::fprintf(stderr, "train_gpt: %s\n", e.what());
        return 2;
    }
    const int rank = distributed::get_rank(), world = distributed::get_world_size();
    if (rank != 0 && !std::freopen("/dev/null", "w", stdout)) return 1; // rank 0 alone prints
    std::string message;
    const int status = run_reporting(argc, argv, message);
    if (!message.empty()) {
        // Before training, every rank meets the same error (the same flags
        // and files) and rank 0 says it. During training an error may be
        // one rank's alone (rank 0's writing a file), while the others wait
        // for it at the next exchange: it ends them all.
        if (world > 1 && training) {
            std::fprintf(stderr, "train_gpt (rank %d of %d): %s\n", rank, world, message.c_str());
            distributed::abort(status);
        }
        if (rank == 0) std::fprintf(stderr, "train_gpt: %s\n", message.c_str());
    }
    distributed::destroy_process_group();
    return status;
}
