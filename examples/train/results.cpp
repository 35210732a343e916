// Result files and closing lines of a train_gpt run, and --sample-only: see results.h.
#include "results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/tensor/svg_text.h"
#include "evaluate.h"
#include "explore.h"
#include "guard.h"
#include "memory.h"
#include "model.h"
#include "progress.h"
#include "svg.h"

namespace train {

using namespace ember;


// The prompt whose attention is drawn (--prompt, else default_prompt) as
// ids, cut to its last block_size characters (or tokens). An InputError names
// a character the vocabulary lacks: the check runs before training
// (session.cpp) and here.
std::vector<int64_t> attention_prompt(const Options& o, const Vocab& vocab, const std::string& default_prompt) {
    std::string prompt = o.prompt.empty() ? default_prompt : o.prompt;
    const auto block = static_cast<size_t>(o.model.block_size);
    if (vocab.is_chars() && prompt.size() > block) prompt = prompt.substr(prompt.size() - block);
    std::vector<int64_t> ids;
    try {
        ids = vocab.encode(prompt);
    } catch (const std::invalid_argument& e) {
        throw InputError(std::string("--prompt: ") + e.what());
    }
    if (ids.size() > block) ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(block));
    return ids;
}

namespace {

// The attention map's prompt when --prompt is not given: the first whole
// line of the validation text (without its newline) that fits the block and
// a picture (48 characters) and has at least a third of that, so the map
// shows a name or a sentence rather than a fragment; else the text's start.
static std::string default_attention_prompt(const Vocab& vocab, const Tensor& val, int64_t block_size) {
    const size_t longest = static_cast<size_t>(std::min<int64_t>(block_size, 48));
    const size_t shortest = std::max<size_t>(2, longest / 3);
    const std::string text = vocab.decode(val.slice(0, 0, std::min<int64_t>(val.numel(), 20000)));
    size_t start = 0;
    // Only whole lines: skip the first one, which the split may have cut.
    if (text.find('\n') != std::string::npos) start = text.find('\n') + 1;
    for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
        const size_t length = end - start;
        if (length >= shortest && length <= longest) return text.substr(start, length);
    }
    return text.substr(0, longest);
}

// Draws every head's attention over attention_prompt(...) to o.attention_map.
void draw_attention(nn::Module& model, const Vocab& vocab, const Options& o, const std::string& default_prompt) {
    const std::vector<int64_t> ids = attention_prompt(o, vocab, default_prompt);
    model.eval();
    auto maps = attention_maps(model, from_vector(ids));
    // One label per position: a character, or a BPE token's text.
    write_attention_svg(o.attention_map, vocab.pieces(ids), maps,
                        "attention of every head for \"" + vocab.decode(from_vector(ids)) + "\"");
}

} // namespace

// Writes `text` to `path` whole or not at all (beside it first, then renamed).
void write_text(const std::string& path, const std::string& text) {
    const std::string why = internal::write_file_whole(path, text);
    if (!why.empty()) throw std::runtime_error("cannot write " + path + ": " + why);
}

void write_losses_csv(const std::string& path, const RunState& run) {
    std::ostringstream out;
    out << "step,loss,eval_train_loss,eval_val_loss\n";
    size_t e = 0;
    for (size_t i = 0; i < run.step_losses.size(); ++i) {
        out << i << "," << format("%.6f", run.step_losses[i]);
        while (e < run.evals.size() && run.evals[e].step < static_cast<int64_t>(i)) ++e;
        if (e < run.evals.size() && run.evals[e].step == static_cast<int64_t>(i))
            out << "," << format("%.6f", run.evals[e].train_loss) << "," << format("%.6f", run.evals[e].val_loss);
        else out << ",,";
        out << "\n";
    }
    write_text(path, out.str());
}

void write_results(const Session& s, double final_train, double final_val, double tokens_per_second) {
    const Options& o = s.run.options;
    const Vocab& vocab = s.run.vocab;
    nn::Module& model = *s.model;
    std::vector<EvalPoint> points;
    for (const EvalRecord& e : s.run.evals) points.push_back({e.step, e.train_loss, e.val_loss});
    points.push_back({o.max_iters, final_train, final_val});
    write_loss_curve_svg(o.out_dir + "/loss.svg", s.run.step_losses, points,
                         "train_gpt: " + o.preset + " on " + s.run.data_name, std::log(double(vocab.size())),
                         "ln(vocab) = " + format("%.2f", std::log(double(vocab.size()))));
    std::string text_sample = sample(model, vocab, o, o.model.block_size);
    write_text(o.out_dir + "/sample.txt", text_sample + "\n");
    std::cout << "\nsample (" << o.sample_tokens << " " << vocab.unit() << ", temperature " << o.temperature
              << (o.top_k > 0 ? ", top-k " + std::to_string(o.top_k) : std::string()) << "):\n"
              << text_sample << "\n\n";
    // Every model with attention draws it: for --prompt, or the start of the
    // validation text, to --attention-map or out/attention.svg.
    std::string written =
        s.checkpoint + ", " + o.out_dir + "/losses.csv, " + o.out_dir + "/loss.svg, " + o.out_dir + "/sample.txt";
    if (has_attention(o.model)) {
        Options drawing = o;
        if (drawing.attention_map.empty()) drawing.attention_map = o.out_dir + "/attention.svg";
        const std::string prompt = default_attention_prompt(vocab, s.data.val, o.model.block_size);
        draw_attention(model, vocab, drawing, prompt);
        // The same prompt in the attention explorer (explore.h), with the run's losses and sample.
        RunState run = s.run;
        run.evals.push_back({o.max_iters, final_train, final_val});
        write_explore_page(o.out_dir + "/explore.html", model, run, attention_prompt(o, vocab, prompt),
                           {.sample = text_sample, .source = "train_gpt, " + s.checkpoint});
        written += ", " + drawing.attention_map + ", " + o.out_dir + "/explore.html";
    }
    if (!s.diagnostics_files.empty()) written += ", " + s.diagnostics_files;
    std::cout << "wrote " << written << "\n";
    if (s.run.best_file_step > 0)
        std::cout << "the lowest val loss, " << format("%.4f", s.run.best_file_val) << " at step "
                  << s.run.best_file_step << ", is in " << s.best_checkpoint << "\n";
    std::cout << "final: step=" << o.max_iters << format(" train_loss=%.4f val_loss=%.4f", final_train, final_val)
              << format(" tokens_per_s=%.0f", tokens_per_second) << " params=" << model.num_parameters() << "\n";
    if (!vocab.is_chars()) {
        // A token's loss covers several characters: per character, the
        // number compares with a character model's on the same text.
        const std::string val_text = vocab.decode(s.data.val);
        const auto chars = std::count_if(val_text.begin(), val_text.end(),
                                         [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
        std::cout << "val loss per character: "
                  << format("%.4f (%.4f per token x %lld tokens / %lld characters of the val text)",
                            final_val * static_cast<double>(s.data.val.numel()) / static_cast<double>(chars), final_val,
                            static_cast<long long>(s.data.val.numel()), static_cast<long long>(chars))
                  << "\n";
    }
}

namespace {

// Which checkpoints hold the run's good state, and the command that goes
// on from the better one with a tenth of the learning rate: the best
// checkpoint when there is one and it holds another state than the latest
// (resuming the latest again may meet the same rise at once).
std::string kept_checkpoints(const Session& s, int64_t first_step) {
    const Options& o = s.run.options;
    const RunState& run = s.run;
    const std::string gentler = " --lr " + format("%g", o.lr / 10);
    std::string text;
    if (s.saved_step > first_step)
        text = "The last good checkpoint, " + s.checkpoint + " (step " + std::to_string(s.saved_step) + "), is kept";
    else if (!o.resume.empty())
        text = "The checkpoint this run resumed from, " + o.resume + " (step " + std::to_string(first_step) +
               "), is unchanged";
    else
        text = "No checkpoint was written (the run diverged before its first evaluation after step 0), and " +
               s.checkpoint + ", if there is one from an earlier run, is unchanged";
    const std::string latest = s.saved_step > first_step ? s.checkpoint : o.resume;
    if (run.best_file_step >= 0 && run.best_file_step != (s.saved_step > first_step ? s.saved_step : first_step))
        return text + "; the best, " + s.best_checkpoint + " (step " + std::to_string(run.best_file_step) +
               format(", val loss %.4f", run.best_file_val) +
               "), too. Go on from the best more gently with: " + "train_gpt --resume " + s.best_checkpoint + gentler;
    if (latest.empty()) return text;
    return text + "; go on from it more gently with: train_gpt --resume " + latest + gentler;
}

// Writes losses.csv for a run that stops; says where its losses are, or, if
// the file cannot be written (a full disk), why not: the stop's own
// explanation must not be lost to a second failure.
std::string losses_kept(const Session& s) {
    const std::string path = s.run.options.out_dir + "/losses.csv";
    try {
        write_losses_csv(path, s.run);
        return "The losses of the steps before are in " + path + ".";
    } catch (const std::exception& e) {
        return "The losses of the steps before could not be written: " + std::string(e.what()) + ".";
    }
}

} // namespace

int stop_diverged(const Session& s, int64_t step, int64_t first_step, double loss, double grad_norm) {
    const Options& o = s.run.options;
    if (distributed::get_rank() != 0) return 3; // every rank stops; rank 0 writes and tells
    std::fprintf(stderr, "train_gpt: %s\n%s.\n%s\n",
                 divergence_message(step, loss, grad_norm, o.lr, o.max_grad_norm).c_str(),
                 kept_checkpoints(s, first_step).c_str(), losses_kept(s).c_str());
    return 3;
}

int stop_val_rising(const Session& s, int64_t step, int64_t first_step, double val_loss) {
    const Options& o = s.run.options;
    if (distributed::get_rank() != 0) return 3;
    std::fprintf(stderr,
                 "train_gpt: stopped at step %lld: the val loss rose to %s, more than %g times its lowest, %.4f at "
                 "step %lld (--divergence-ratio %g). The usual cause is a learning rate too high for the model "
                 "(--lr %g): the weights are moving away from what they had learnt. Nothing of this state was "
                 "saved.\n%s.\n%s\n",
                 static_cast<long long>(step), std::isnan(val_loss) ? "nan" : format("%.4f", val_loss).c_str(),
                 o.divergence_ratio, s.run.best_val, static_cast<long long>(s.run.best_step), o.divergence_ratio, o.lr,
                 kept_checkpoints(s, first_step).c_str(), losses_kept(s).c_str());
    return 3;
}

void sample_only(const Options& o) {
    RunState saved = read_run(o.sample_only);
    ModelConfig mc = saved.options.model;
    // Checked before the model is built: its size (a file may claim any) and the attention map's inputs.
    MemoryEstimate need = estimate_memory(mc, 1, 0); // weights, and the optimiser's state read with them
    std::string too_large = memory_problem(need, available_memory(), "the model of " + o.sample_only);
    if (!too_large.empty()) throw InputError(too_large);
    Options so = o;
    so.model = mc;
    const std::string default_prompt = "\n";
    if (!o.attention_map.empty()) {
        if (!has_attention(mc))
            throw UsageError("--attention-map: the " + std::string(stage_name(mc.stage)) + " model of " +
                             o.sample_only + " has no attention");
        attention_prompt(so, saved.vocab, default_prompt);
        check_writable(o.attention_map, "--attention-map");
    }
    auto model = make_model(mc);
    restore_run(o.sample_only, *model, nullptr);
    std::cout << sample(*model, saved.vocab, so, mc.block_size) << "\n";
    if (!o.attention_map.empty()) {
        draw_attention(*model, saved.vocab, so, default_prompt);
        std::cout << "attention map written to " << o.attention_map << "\n";
    }
}

} // namespace train
