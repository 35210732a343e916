// train_gpt: trains a character-level GPT and shows it learning.
//
// The "Let's build GPT" lecture's training loop: a 90/10 split of the text,
// random batches drawn as its get_batch draws them, AdamW, an evaluation of
// train and val loss every eval_interval steps, and a sample at the end.
// One change: the final evaluation comes after the last step and after the
// checkpoint is saved (the lecture evaluates before training the last step),
// so that a run stopped at step N and resumed draws exactly the batches an
// uninterrupted run draws.
// With no arguments it trains a small GPT on a generated play in a few
// minutes; --preset reproduces the lecture's stages on tiny Shakespeare
// (--data). It writes a checkpoint (resumable, and saved on Ctrl-C), the
// losses as CSV and SVG, and optionally an attention map. The last line is
// machine-readable: final: step=... train_loss=... val_loss=... tokens_per_s=...
// examples/train_gpt.py is its PyTorch twin; docs/training.md explains it all.
//
//   build/examples/train_gpt [--help]
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include <ember.h>

#include "train/corpus.h"
#include "train/data.h"
#include "train/model.h"
#include "train/options.h"
#include "train/progress.h"
#include "train/run_state.h"
#include "train/svg.h"

using namespace ember;
using namespace train;

namespace {

// Ctrl-C sets this; the loop saves a checkpoint at the next step boundary.
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }

// A problem with the user's input (data, checkpoint, flags): exit status 2.
class InputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot read data file " + path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    if (text.empty()) throw InputError("data file " + path + " is empty");
    return text;
}

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, a, b, c);
    return buf;
}

// The lecture's estimate_loss: the mean loss of eval_iters random batches of
// each split, in eval mode (dropout off), without a graph.
std::pair<double, double> estimate_loss(nn::Module& model, const Splits& data, const Options& o) {
    NoGradGuard no_grad;
    model.eval();
    double means[2];
    const Tensor* splits[2] = {&data.train, &data.val};
    for (int s = 0; s < 2; ++s) {
        double total = 0;
        for (int64_t k = 0; k < o.eval_iters; ++k) {
            auto [x, y] = get_batch(*splits[s], o.batch_size, o.model.block_size);
            Tensor logits = model.forward(x); // (B,T,V)
            total += cross_entropy(logits.view({-1, logits.size(-1)}), y.reshape({-1})).item();
        }
        means[s] = total / static_cast<double>(o.eval_iters);
    }
    model.train();
    return {means[0], means[1]};
}

void write_losses_csv(const std::string& path, const RunState& run) {
    std::ofstream out(path + ".tmp");
    out << "step,loss,eval_train_loss,eval_val_loss\n";
    size_t e = 0;
    for (size_t i = 0; i < run.step_losses.size(); ++i) {
        out << i << "," << format("%.6f", run.step_losses[i]);
        while (e < run.evals.size() && run.evals[e].step < static_cast<int64_t>(i)) ++e;
        if (e < run.evals.size() && run.evals[e].step == static_cast<int64_t>(i))
            out << "," << format("%.6f", run.evals[e].train_loss) << "," << format("%.6f", run.evals[e].val_loss);
        else
            out << ",,";
        out << "\n";
    }
    out.close();
    if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0) throw std::runtime_error("cannot write " + path);
}

std::string sample(nn::Module& model, const Vocab& vocab, const Options& o, int64_t block_size) {
    Generator gen(o.sample_seed);
    model.eval();
    // The lecture starts from token 0 (a newline in Shakespeare).
    Tensor context = zeros({1, 1}, kInt64);
    std::optional<int64_t> top_k = o.top_k > 0 ? std::optional<int64_t>(o.top_k) : std::nullopt;
    Tensor ids = nn::generate(model, block_size, context, o.sample_tokens, o.temperature, top_k, &gen);
    return vocab.decode(ids[0].slice(0, 1));
}

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
    if (maps.empty()) throw InputError("--attention-map: this model (" + std::string(stage_name(o.model.stage)) + ") has no attention");
    write_attention_svg(o.attention_map, prompt, maps, "attention of every head for \"" + prompt + "\"");
}

int run(int argc, char** argv) {
    Options o;
    if (!parse_options(argc, argv, o)) return 0;
    if (o.threads > 0) set_num_threads(o.threads);

    // ---- sample only -------------------------------------------------------------------
    if (!o.sample_only.empty()) {
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
        return 0;
    }

    // ---- the run's settings: fresh, or those of the checkpoint --------------------------
    RunState run;
    if (!o.resume.empty()) {
        run = read_run(o.resume);
        for (const char* flag : {"--preset", "--n-embd", "--n-head", "--n-layer", "--block-size", "--dropout",
                                 "--batch-size", "--lr", "--eval-interval", "--eval-iters", "--seed"})
            if (o.given.count(flag))
                throw UsageError(std::string(flag) + " cannot change when resuming (the checkpoint fixes it)");
        Options keep = o;
        o = run.options;
        o.resume = keep.resume;
        o.out_dir = keep.out_dir;
        o.threads = keep.threads;
        o.sample_tokens = keep.sample_tokens;
        o.temperature = keep.temperature;
        o.top_k = keep.top_k;
        o.sample_seed = keep.sample_seed;
        o.attention_map = keep.attention_map;
        o.prompt = keep.prompt;
        if (keep.given.count("--max-iters")) o.max_iters = keep.max_iters; // training longer is fine
        o.data_path = keep.given.count("--data") ? keep.data_path : run.data_name == "(generated play)" ? "" : run.data_name;
    }

    // ---- data ---------------------------------------------------------------------------
    std::string text = o.data_path.empty() ? default_corpus() : read_text(o.data_path);
    Vocab vocab = Vocab::from_text(text);
    if (!o.resume.empty()) {
        if (fingerprint(text) != run.data_fingerprint || vocab.chars() != run.vocab.chars())
            throw InputError("the checkpoint was trained on other data than " +
                             (o.data_path.empty() ? std::string("the generated play") : o.data_path));
    }
    run.options = o;
    run.vocab = vocab;
    run.data_fingerprint = fingerprint(text);
    run.data_name = o.data_path.empty() ? "(generated play)" : o.data_path;
    o.model.vocab_size = vocab.size();
    run.options.model.vocab_size = vocab.size();
    Splits data = split_90_10(from_vector(vocab.encode(text)));
    for (const auto& [name, part] : {std::pair{"training", &data.train}, std::pair{"validation", &data.val}})
        if (part->numel() <= o.model.block_size)
            throw InputError(std::string("the ") + name + " text (" + std::to_string(part->numel()) +
                             " characters) is not longer than block_size=" + std::to_string(o.model.block_size) +
                             "; use a longer text or a smaller --block-size");
    if (!o.attention_map.empty() && o.model.stage == Stage::Bigram)
        throw UsageError("--attention-map: the bigram model has no attention");

    // ---- model and optimiser (drawing from the seeded generator, as the lecture) --------
    manual_seed(o.seed);
    auto model = make_model(o.model);
    optim::AdamW optimizer(model->parameters(), {.lr = o.lr});
    if (!o.resume.empty()) restore_run(o.resume, *model, &optimizer);
    std::filesystem::create_directories(o.out_dir);
    const std::string ckpt = o.out_dir + "/train_gpt.safetensors";

    std::cout << "data: " << run.data_name << ", " << text.size() << " characters, vocabulary of " << vocab.size()
              << "\n";
    std::cout << "model: " << o.preset << " (" << stage_name(o.model.stage) << "), "
              << format("%.6f M parameters", static_cast<double>(model->num_parameters()) / 1e6) << "\n";
    std::cout << "expected starting loss ln(" << vocab.size() << ") = " << format("%.4f", std::log(double(vocab.size())))
              << "\n";
    if (run.next_step > 0) std::cout << "resuming at step " << run.next_step << " from " << o.resume << "\n";
    std::cout << std::flush; // a log file shows the header before the first, possibly slow, evaluation
    if (run.next_step >= o.max_iters) throw UsageError("the checkpoint already ran " + std::to_string(run.next_step) +
                                                       " steps; pass a larger --max-iters to train longer");

    // ---- training -------------------------------------------------------------------------
    std::signal(SIGINT, on_sigint);
    const bool terminal = isatty(fileno(stdout));
    Progress progress(o.max_iters, o.batch_size * o.model.block_size, terminal, std::max<int64_t>(1, o.eval_interval / 5));
    model->train();
    for (int64_t step = run.next_step; step < o.max_iters; ++step) {
        if (step % o.eval_interval == 0) {
            auto [train_loss, val_loss] = estimate_loss(*model, data, o);
            run.evals.push_back({step, train_loss, val_loss});
            progress.message(format("step %.0f: train loss %.4f, val loss %.4f", double(step), train_loss, val_loss));
        }
        auto start = std::chrono::steady_clock::now();
        auto [xb, yb] = get_batch(data.train, o.batch_size, o.model.block_size);
        Tensor logits = model->forward(xb);
        Tensor loss = cross_entropy(logits.view({-1, vocab.size()}), yb.reshape({-1}));
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        run.step_losses.push_back(loss.item());
        run.next_step = step + 1;
        progress.step(step, run.step_losses.back(), seconds);
        if (interrupted) {
            progress.finish();
            save_run(ckpt, run, *model, optimizer);
            std::cout << "interrupted after step " << step << "; checkpoint saved to " << ckpt
                      << "\nresume with: train_gpt --resume " << ckpt << "\n";
            return 130;
        }
    }
    progress.finish();

    // ---- results ----------------------------------------------------------------------------
    // Save first: the final evaluation draws batches that must not be part
    // of the saved stream (a resumed run would otherwise diverge).
    save_run(ckpt, run, *model, optimizer);
    write_losses_csv(o.out_dir + "/losses.csv", run);
    auto [final_train, final_val] = estimate_loss(*model, data, o);
    progress.message(format("step %.0f: train loss %.4f, val loss %.4f", double(o.max_iters), final_train, final_val));
    std::vector<EvalPoint> points;
    for (const EvalRecord& e : run.evals) points.push_back({e.step, e.train_loss, e.val_loss});
    points.push_back({o.max_iters, final_train, final_val});
    write_loss_curve_svg(o.out_dir + "/loss.svg", run.step_losses, points,
                         "train_gpt: " + o.preset + " on " + run.data_name, std::log(double(vocab.size())),
                         "ln(vocab) = " + format("%.2f", std::log(double(vocab.size()))));
    std::string text_sample = sample(*model, vocab, o, o.model.block_size);
    std::ofstream(o.out_dir + "/sample.txt") << text_sample << "\n";
    std::cout << "\nsample (" << o.sample_tokens << " characters, temperature " << o.temperature
              << (o.top_k > 0 ? ", top-k " + std::to_string(o.top_k) : std::string()) << "):\n"
              << text_sample << "\n\n";
    // Every model with attention draws it: for --prompt, or the start of the
    // validation text, to --attention-map or out/attention.svg.
    std::string written = ckpt + ", " + o.out_dir + "/losses.csv, " + o.out_dir + "/loss.svg, " + o.out_dir + "/sample.txt";
    if (o.model.stage != Stage::Bigram) {
        Options drawing = o;
        if (drawing.attention_map.empty()) drawing.attention_map = o.out_dir + "/attention.svg";
        std::string val_text = vocab.decode(data.val.slice(0, 0, std::min<int64_t>(o.model.block_size, 48)));
        draw_attention(*model, vocab, drawing, val_text);
        written += ", " + drawing.attention_map;
    }
    std::cout << "wrote " << written << "\n";
    std::cout << "final: step=" << o.max_iters << format(" train_loss=%.4f val_loss=%.4f", final_train, final_val)
              << format(" tokens_per_s=%.0f", progress.tokens_per_second()) << " params=" << model->num_parameters()
              << "\n";
    return 0;
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
    } catch (const std::exception& e) {
        std::fprintf(stderr, "train_gpt: internal error: %s\n", e.what());
        return 1;
    }
}
