// The two things train_gpt does with a model in eval mode (dropout off, no
// graph): the lecture's estimate_loss, the mean loss of a few random batches
// of each split, and a sample of generated text. Used by train_gpt.cpp's
// loop and by results.cpp; tested end to end by tests/test_train_gpt.cpp.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <ember.h>

#include "data.h"
#include "options.h"

namespace train {

// The mean loss of o.eval_iters batches (B,T) = (o.batch_size, o.model.block_size)
// of data.train, then of data.val: {train_loss, val_loss}. Leaves the model in
// training mode. Under mpirun every rank takes part: each computes the loss
// of its share of every batch (get_batch_share), and all get the mean.
// Nothing if Ctrl-C (or SIGTERM, SIGHUP: guard.h) came during the estimate:
// it stops at the next batch.
std::optional<std::pair<double, double>> estimate_loss(ember::nn::Module& model, const Splits& data, const Options& o);

// o.sample_tokens characters generated after token 0, at o.temperature, from
// the o.top_k likeliest (0: all), drawn by a generator seeded with
// o.sample_seed. Leaves the model in eval mode.
std::string sample(ember::nn::Module& model, const Vocab& vocab, const Options& o, int64_t block_size);

} // namespace train
