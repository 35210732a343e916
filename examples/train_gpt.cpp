// train_gpt: trains a character-level GPT and shows it learning: with no
// arguments a small GPT on a generated play, in a few minutes; with --preset
// and --data the "Let's build GPT" lecture's stages on tiny Shakespeare.
// train_loop below is the lecture's loop, every other step named and kept in
// examples/train/ (loop.h: evaluate, the exchange between processes, Ctrl-C;
// the settings and resume, data, models, checkpoints, progress, the files it
// writes to out/). Its last line is machine-readable:
// final: step=... train_loss=... val_loss=...
// Twin: examples/train_gpt.py; tests: tests/test_train_gpt.cpp; docs: docs/training.md.
//
//   build/examples/train_gpt [--help]
#include <chrono>
#include <cstdio>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <unistd.h>

#include <ember.h>

#include "train/data.h"
#include "train/diagnostics.h"
#include "train/guard.h"
#include "train/loop.h"
#include "train/options.h"
#include "train/progress.h"
#include "train/results.h"
#include "train/session.h"

using namespace ember;
using namespace train;

namespace {

// The lecture's loop: a random batch of the 90% training text per step,
// AdamW, and the train and val loss estimated every eval_interval steps.
// Added, each a named step: the gradient exchange under mpirun -np N (every
// rank runs this loop on its share of each batch and all step alike;
// docs/distributed.md); clipping (--max-grad-norm) and the divergence
// check, which stops a run whose loss or gradient is no longer finite; and
// Ctrl-C, which stops after saving. Returns the exit status: 0, 130 after
// Ctrl-C (checkpoint saved), 3 if it diverged (the last good checkpoint kept).
int train_loop(Session& s) {
    const Options& o = s.run.options;
    nn::Module& model = *s.model;
    optim::AdamW& optimizer = *s.optimizer;
    const int64_t first_step = s.run.next_step;
    Progress progress(o.max_iters, o.grad_accum * o.batch_size * o.model.block_size, isatty(fileno(stdout)) != 0,
                      std::max<int64_t>(1, o.eval_interval / 5));
    double exchange_seconds = 0;            // in the all-reduce of gradients and loss, over all steps
    std::optional<Diagnostics> diagnostics; // --diagnostics: activations, gradients, update ratios (diagnostics.h)
    if (o.diagnostics) diagnostics.emplace(model);
    model.train();
    for (int64_t step = first_step; step < o.max_iters; ++step) {
        if (step % o.eval_interval == 0) { // estimate the losses, then save (or stop if the loss rose)
            if (const int stop = evaluate(s, step, first_step, progress); stop != 0) return stop;
        }
        const auto started = std::chrono::steady_clock::now();
        optimizer.zero_grad();
        // --grad-accum G: G batches' gradients add up, each loss divided by G,
        // so the step follows the mean loss of G x batch_size sequences.
        Tensor loss = zeros({});
        if (diagnostics && step == o.max_iters - 1) diagnostics->capture_next_forward(); // the last step's histograms
        for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
            auto [xb, yb] = get_batch_share(s.data.train, o.batch_size, o.model.block_size); // (B/N,T) each
            // (each micro-batch its own dropout stream under mpirun: Note [dropout over ranks])
            // (the stream's index wraps modulo 2^64 rather than overflow)
            const auto index = static_cast<int64_t>(static_cast<uint64_t>(step) * static_cast<uint64_t>(o.grad_accum) +
                                                    static_cast<uint64_t>(micro));
            Tensor micro_loss = share_loss(model, xb, yb, o, index); // forward and loss
            if (o.grad_accum > 1) micro_loss = micro_loss / static_cast<double>(o.grad_accum);
            micro_loss.backward();
            loss = loss + micro_loss.detach();
        }
        const double batch_loss = exchange_gradients(model, loss, exchange_seconds); // one process: as is
        if (diagnostics) diagnostics->after_backward(step);
        const double grad_norm = optim::clip_grad_norm_(model.parameters(), o.max_grad_norm); // infinity: not clipped
        if (!finite_step(batch_loss, grad_norm, o.max_grad_norm)) {
            progress.finish();
            return stop_diverged(s, step, first_step, batch_loss, grad_norm); // keeps the last good checkpoint
        }
        optimizer.options.lr = learning_rate_at(o, step); // nanoGPT's warm-up and cosine; --lr without them
        if (diagnostics) diagnostics->before_update();
        optimizer.step();
        if (diagnostics) diagnostics->after_update(step);
        record_step(s, step, batch_loss, started, progress);
        if (interrupted_everywhere()) return stop_interrupted(s, first_step, progress, default_generator().get_state());
    }
    if (diagnostics && distributed::get_rank() == 0) {
        try { // listed with the other files at the end
            s.diagnostics_files = diagnostics->write(o.out_dir, "train_gpt --preset " + o.preset);
        } catch (const std::runtime_error& e) { // a full disk: the run still saves what it can
            std::fprintf(stderr, "train_gpt: --diagnostics: %s\n", e.what());
        }
    }
    return finish_run(s, progress, first_step, exchange_seconds);
}

// What a run ended with: its exit status, and the message for an error.
struct Outcome {
    int status = 0;
    std::string message;
    bool while_training = false; // the error came after the first step began (perhaps on one rank alone)
    bool trained = false;        // the loop ran to its end (or its stop) on every rank
};

// Runs train_gpt; every error ends here, as a message and an exit status.
Outcome run(int argc, char** argv) {
    Outcome outcome;
    try {
        Options o;
        if (!parse_options(argc, argv, o)) return outcome;
        if (o.threads > 0) set_num_threads(o.threads);
        if (!o.sample_only.empty()) {
            sample_only(o);
            return outcome;
        }
        catch_interrupts();           // from here a signal stops the run where it can save (guard.h)
        Session s = start_session(o); // prints the header: data, model, expected starting loss
        if (o.summary) {
            // One batch's shape through the model: torchinfo's table (nn/summary.h).
            std::cout << nn::summary(*s.model,
                                     zeros({s.run.options.batch_size, s.run.options.model.block_size}, kInt64));
            return outcome;
        }
        outcome.while_training = true;
        outcome.status = train_loop(s);
        outcome.trained = true;
    } catch (const UsageError& e) {
        outcome = {2, std::string(e.what()) + "\nrun train_gpt --help for the options", outcome.while_training};
    } catch (const InputError& e) {
        outcome = {2, e.what(), outcome.while_training};
    } catch (const nn::SafetensorsError& e) {
        outcome = {2, e.what(), outcome.while_training};
    } catch (const DivergedError& e) {
        outcome = {3, e.what(), outcome.while_training};
    } catch (const OutOfMemoryError& e) {
        // The estimate passed, but the machine (or a limit such as ulimit -v) gave less.
        outcome = {2, std::string(e.what()) + "\nuse a smaller --n-embd, --n-layer, --batch-size or --block-size",
                   outcome.while_training};
    } catch (const std::bad_alloc&) {
        // Memory for something other than a tensor (the text, a vector): the machine is full.
        outcome = {2,
                   "out of memory: the machine (or a limit such as ulimit -v) has no more to give; use a smaller "
                   "--n-embd, --n-layer, --batch-size or --block-size, or a smaller --data",
                   outcome.while_training};
    } catch (const std::exception& e) {
        outcome = {1, std::string("internal error: ") + e.what(), outcome.while_training};
    }
    return outcome;
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
    const Outcome outcome = run(argc, argv);
    if (!outcome.message.empty()) {
        // Before training, every rank meets the same error (the same flags
        // and files) and rank 0 says it. During training an error may be
        // one rank's alone (rank 0's writing a file), while the others wait
        // for it at the next exchange: it ends them all.
        if (world > 1 && outcome.while_training) {
            std::fprintf(stderr, "train_gpt (rank %d of %d): %s\n", rank, world, outcome.message.c_str());
            distributed::abort(outcome.status);
        }
        if (rank == 0) std::fprintf(stderr, "train_gpt: %s\n", outcome.message.c_str());
    }
    // After the loop every rank waits for rank 0's last writes (a checkpoint
    // after a signal, losses.csv after a divergence): mpirun ends the others
    // as soon as one rank exits with a status other than 0. (Not after an
    // error before training, which one rank may meet alone: it exits, and
    // mpirun ends the rest.)
    if (world > 1 && outcome.trained) distributed::barrier();
    distributed::destroy_process_group();
    return outcome.status;
}
