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

// The lecture's loop: a random batch of the 90% training text per step, AdamW,
// and the train and val loss estimated every eval_interval steps. Added: a
// checkpoint before each estimate; the gradient norm (clipped with
// --max-grad-norm), and a stop when it or the loss is not finite; the final
// estimate after the last step and the checkpoint, so that a run stopped at step
// N and resumed draws exactly the batches an uninterrupted run draws.
// Returns the exit status: 0, 130 after Ctrl-C (checkpoint saved), 3 if it diverged.
int train_loop(Session& s) {
    const Options& o = s.run.options;
    nn::Module& model = *s.model;
    optim::AdamW& optimizer = *s.optimizer;
    std::signal(SIGINT, on_sigint);
    const bool terminal = isatty(fileno(stdout));
    Progress progress(o.max_iters, o.batch_size * o.model.block_size, terminal,
                      std::max<int64_t>(1, o.eval_interval / 5));
    model.train();
    const int64_t first_step = s.run.next_step;
    for (int64_t step = first_step; step < o.max_iters; ++step) {
        if (step % o.eval_interval == 0) {
            if (step > first_step) save_run(s.checkpoint, s.run, model, optimizer);
            auto [train_loss, val_loss] = estimate_loss(model, s.data, o);
            s.run.evals.push_back({step, train_loss, val_loss});
            progress.message(eval_line(step, train_loss, val_loss));
        }
        auto start = std::chrono::steady_clock::now();
        auto [xb, yb] = get_batch(s.data.train, o.batch_size, o.model.block_size); // (B,T) each
        Tensor logits = model.forward(xb);                                         // (B,T,V)
        Tensor loss = cross_entropy(logits.view({-1, logits.size(-1)}), yb.reshape({-1}));
        optimizer.zero_grad();
        loss.backward();
        double grad_norm = optim::clip_grad_norm_(model.parameters(), o.max_grad_norm); // infinity: not clipped
        if (!finite_step(loss.item(), grad_norm, o.max_grad_norm)) {
            progress.finish();
            return stop_diverged(s, step, first_step, loss.item(), grad_norm); // keeps the last good checkpoint
        }
        optimizer.step();
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        s.run.step_losses.push_back(loss.item());
        s.run.next_step = step + 1;
        progress.step(step, s.run.step_losses.back(), seconds);
        if (interrupted) {
            progress.finish();
            save_run(s.checkpoint, s.run, model, optimizer);
            std::cout << "interrupted after step " << step << "; checkpoint saved to " << s.checkpoint
                      << "\nresume with: train_gpt --resume " << s.checkpoint << "\n";
            return 130;
        }
    }
    progress.finish();

    // Save first: the final estimate draws batches that must not be part of
    // the saved stream (a resumed run would otherwise diverge).
    save_run(s.checkpoint, s.run, model, optimizer);
    write_losses_csv(o.out_dir + "/losses.csv", s.run);
    auto [final_train, final_val] = estimate_loss(model, s.data, o);
    progress.message(eval_line(o.max_iters, final_train, final_val));
    write_results(s, final_train, final_val, progress.tokens_per_second());
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

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "train_gpt: %s\nrun train_gpt --help for the options\n", e.what());
        return 2;
    } catch (const InputError& e) {
        std::fprintf(stderr, "train_gpt: %s\n", e.what());
        return 2;
    } catch (const nn::CheckpointError& e) {
        std::fprintf(stderr, "train_gpt: %s\n", e.what());
        return 2;
    } catch (const DivergedError& e) {
        std::fprintf(stderr, "train_gpt: %s\n", e.what());
        return 3;
    } catch (const OutOfMemoryError& e) {
        // The estimate passed, but the machine (or a limit such as ulimit -v) gave less.
        std::fprintf(stderr, "train_gpt: %s\nuse a smaller --n-embd, --n-layer, --batch-size or --block-size\n",
                     e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "train_gpt: internal error: %s\n", e.what());
        return 1;
    }
}
