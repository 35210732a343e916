// What a train_gpt run leaves behind after its loop: out/losses.csv, the loss
// curve (loss.svg), sample.txt, the attention map (attention.svg, or
// --attention-map), the attention explorer (explore.html), and the closing
// lines it prints (the sample, the files written and the machine-readable
// final line), or the report of a run that diverged; also --sample-only,
// which prints a checkpoint's sample and draws its attention without training.
// Tests: tests/test_train_gpt.cpp, tests/test_svg.cpp; docs: docs/training.md.
#pragma once

#include <string>

#include "options.h"
#include "run_state.h"
#include "session.h"

namespace train {

// The prompt whose attention is drawn (o.prompt, else default_prompt), as
// ids, cut to its last block_size characters (BPE: tokens). Throws
// InputError naming a character the vocabulary lacks: start_session checks
// --prompt with it before training.
std::vector<int64_t> attention_prompt(const Options& o, const Vocab& vocab, const std::string& default_prompt);

// step,loss,eval_train_loss,eval_val_loss: every step's loss, and the
// evaluations at their steps. Written whole or not at all (beside it, then renamed).
void write_losses_csv(const std::string& path, const RunState& run);

// After the last step, the checkpoint and losses.csv: the loss curve with the
// final evaluation, the sample, the attention map and the attention explorer
// (every model with attention) and the closing lines.
void write_results(const Session& s, double final_train, double final_val, double tokens_per_second);

// After step `step` of a run that began at `first_step` gave a loss or a
// gradient norm that is not finite: writes losses.csv (the steps before it)
// and says what happened, what to try, and which checkpoints hold the last
// good state (the latest saved, the best, else the one resumed from; none is
// written now), on rank 0 only. Returns train_gpt's exit status for it, 3.
int stop_diverged(const Session& s, int64_t step, int64_t first_step, double loss, double grad_norm);

// The same after the evaluation at `step` found the val loss above
// --divergence-ratio times its lowest: a finite divergence. Returns 3.
int stop_val_rising(const Session& s, int64_t step, int64_t first_step, double val_loss);

// --sample-only CKPT: prints a sample of the checkpoint's model, and draws its
// attention with --attention-map.
void sample_only(const Options& o);

} // namespace train
