// Result files and closing lines of a train_gpt run, and --sample-only: see results.h.
#include "results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <vector>

#include "evaluate.h"
#include "guard.h"
#include "model.h"
#include "progress.h"
#include "svg.h"

namespace train {

using namespace ember;

namespace {

// Draws every head's attention over the prompt (--prompt, else default_prompt;
// its last block_size characters) to o.attention_map.
void draw_attention(nn::Module& model, const Vocab& vocab, const Options& o, const std::string& default_prompt) {
    std::string prompt = o.prompt.empty() ? default_prompt : o.prompt;
    if (static_cast<int64_t>(prompt.size()) > o.model.block_size)
        prompt = prompt.substr(prompt.size() - static_cast<size_t>(o.model.block_size));
    std::vector<int64_t> ids;
    try {
        ids = vocab.encode(prompt);
    } catch (const std::invalid_argument& e) {
        throw InputError(std::string("--prompt: ") + e.what());
    }
    model.eval();
    auto maps = attention_maps(model, from_vector(ids));
    if (maps.empty())
        throw InputError("--attention-map: this model (" + std::string(stage_name(o.model.stage)) +
                         ") has no attention");
    write_attention_svg(o.attention_map, prompt, maps, "attention of every head for \"" + prompt + "\"");
}

} // namespace

void write_losses_csv(const std::string& path, const RunState& run) {
    std::ofstream out(path + ".tmp");
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
    out.close();
    if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
        throw std::runtime_error("cannot write " + path);
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
    std::ofstream(o.out_dir + "/sample.txt") << text_sample << "\n";
    std::cout << "\nsample (" << o.sample_tokens << " characters, temperature " << o.temperature
              << (o.top_k > 0 ? ", top-k " + std::to_string(o.top_k) : std::string()) << "):\n"
              << text_sample << "\n\n";
    // Every model with attention draws it: for --prompt, or the start of the
    // validation text, to --attention-map or out/attention.svg.
    std::string written =
        s.checkpoint + ", " + o.out_dir + "/losses.csv, " + o.out_dir + "/loss.svg, " + o.out_dir + "/sample.txt";
    if (has_attention(o.model.stage)) {
        Options drawing = o;
        if (drawing.attention_map.empty()) drawing.attention_map = o.out_dir + "/attention.svg";
        std::string val_text = vocab.decode(s.data.val.slice(0, 0, std::min<int64_t>(o.model.block_size, 48)));
        draw_attention(model, vocab, drawing, val_text);
        written += ", " + drawing.attention_map;
    }
    std::cout << "wrote " << written << "\n";
    std::cout << "final: step=" << o.max_iters << format(" train_loss=%.4f val_loss=%.4f", final_train, final_val)
              << format(" tokens_per_s=%.0f", tokens_per_second) << " params=" << model.num_parameters() << "\n";
}

int stop_diverged(const Session& s, int64_t step, int64_t first_step, double loss, double grad_norm) {
    const Options& o = s.run.options;
    if (distributed::get_rank() != 0) return 3; // every rank stops; rank 0 writes and tells
    write_losses_csv(o.out_dir + "/losses.csv", s.run);
    // The loop saves before each evaluation after the first step of the run.
    const int64_t last_save = step / o.eval_interval * o.eval_interval;
    std::string kept;
    if (last_save > first_step)
        kept = "The last good checkpoint, " + s.checkpoint + " (step " + std::to_string(last_save) +
               "), is kept; go on from it more gently with: train_gpt --resume " + s.checkpoint + " --lr " +
               format("%g", o.lr / 10);
    else if (!o.resume.empty())
        kept = "The checkpoint this run resumed from, " + o.resume + " (step " + std::to_string(first_step) +
               "), is unchanged; go on from it more gently with: train_gpt --resume " + o.resume + " --lr " +
               format("%g", o.lr / 10);
    else
        kept = "No checkpoint was written (the run diverged before its first evaluation after step 0), and " +
               s.checkpoint + ", if there is one from an earlier run, is unchanged";
    std::fprintf(stderr, "train_gpt: %s\n%s.\nThe losses of the steps before are in %s/losses.csv.\n",
                 divergence_message(step, loss, grad_norm, o.lr, o.max_grad_norm).c_str(), kept.c_str(),
                 o.out_dir.c_str());
    return 3;
}

void sample_only(const Options& o) {
    RunState saved = read_run(o.sample_only);
    ModelConfig mc = saved.options.model;
    auto model = make_model(mc);
    restore_run(o.sample_only, *model, nullptr);
    Options so = o;
    so.model = mc;
    std::cout << sample(*model, saved.vocab, so, mc.block_size) << "\n";
    if (!o.attention_map.empty()) {
        draw_attention(*model, saved.vocab, so, o.prompt.empty() ? std::string("\n") : o.prompt);
        std::cout << "attention map written to " << o.attention_map << "\n";
    }
}

} // namespace train
