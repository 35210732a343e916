// The attention explorer: one self-contained HTML page (script, styles and
// data inline, no network) showing what a trained model computed for one
// prompt: the head view, the model view, the query view (q, k, q.k, the
// scale, the mask, the softmax and the weighted sum of v for one query),
// the next-token predictions with a temperature slider, and the training
// run's loss curve and sample. Every number in it is ember's, captured by
// look_inside (model.h), written with the shortest digits that read back as
// the same float. train_gpt writes it at the end of a run (out/explore.html),
// the explore program for any checkpoint and prompt.
// Tests: tests/explore_browser.py (the explore program, and the pages of
// explore and train_gpt in headless Chromium); docs: docs/explorer.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ember.h>

#include "run_state.h"

namespace train {

struct ExploreOptions {
    int64_t top_k = 5; // next tokens shown at each position
    // The query view needs each head's q, k and v, T x C numbers per layer
    // (and as many for the weighted sums): every layer's while they number
    // at most kAllLayersLimit, else only this layer's (counted from 0;
    // InputError naming it, counted from 1, if the model has no such layer).
    int64_t layer = 0;
    std::string sample;        // the run's sample ("": none)
    std::string source;        // where the model came from ("train_gpt run, out/train_gpt.safetensors")
    bool with_training = true; // the training view: run.step_losses and run.evals
};

// The q, k, v and weighted sums of every layer are kept while they number at
// most this many floats (about 1.5 MB of text).
inline constexpr int64_t kAllLayersLimit = 150000;

// The page for `ids` (1 <= T <= block_size) run through `model`, built from
// run.options.model, as HTML text. Throws InputError if the model has no
// attention or ids are empty or longer than the block.
std::string explore_page(ember::nn::Module& model, const RunState& run, const std::vector<int64_t>& ids,
                         const ExploreOptions& options);

// Writes explore_page(...) to `path` whole or not at all (std::runtime_error
// naming the path if it cannot).
void write_explore_page(const std::string& path, ember::nn::Module& model, const RunState& run,
                        const std::vector<int64_t>& ids, const ExploreOptions& options);

// Which model and attention form computed the page's numbers, in a sentence
// ("gpt.py's GPT in the fast model (...)").
std::string attention_form(const ModelConfig& config);

// The page's template: HTML with its styles and script, and the marker
// "EMBER_DATA" where the data (JSON) goes (explore_page.cpp).
const std::string& explore_template();

} // namespace train
