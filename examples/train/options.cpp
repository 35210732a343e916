// train_gpt's flags and presets: see options.h.
#include "options.h"

#include <functional>
#include <iostream>
#include <map>
#include <vector>

namespace train {

namespace {

// The lecture's settings for each stage (bigram.py, the v2.py stages of the
// video, gpt.py), and ember's default run on its generated corpus: one row
// each, as examples/train_gpt.py's PRESETS.
struct Preset {
    const char* name;
    ModelConfig model;
    int64_t batch_size;
    double lr;
    int64_t max_iters, eval_interval, eval_iters;
};

// The stages' common sizes; each runs in the lecture's classes.
ModelConfig stage(Stage s, int64_t n_head = 4) {
    return {.stage = s,
            .block_size = 8,
            .n_embd = 32,
            .n_head = n_head,
            .n_layer = 3,
            .dropout = 0.0,
            .kind = ModelKind::Lecture};
}

const Preset kPresets[] = {
    {"default",
     {.stage = Stage::GPT, .block_size = 64, .n_embd = 64, .n_head = 4, .n_layer = 3},
     32,
     2e-3,
     1000,
     100,
     20},
    {"bigram", stage(Stage::Bigram), 32, 1e-2, 3000, 300, 200},
    // The lecture adds the embeddings with the bigram's settings, before attention.
    {"embed", stage(Stage::Embed), 32, 1e-2, 3000, 300, 200},
    {"head", stage(Stage::Head, 1), 32, 1e-3, 5000, 500, 200},
    {"multihead", stage(Stage::MultiHead), 32, 1e-3, 5000, 500, 200},
    {"ffwd", stage(Stage::FeedForward), 32, 1e-3, 5000, 500, 200},
    {"blocks", stage(Stage::Blocks), 32, 1e-3, 5000, 500, 200},
    {"layernorm", stage(Stage::LayerNorm), 32, 1e-3, 5000, 500, 200},
    {"lecture",
     {.stage = Stage::GPT, .block_size = 256, .n_embd = 384, .n_head = 6, .n_layer = 6, .dropout = 0.2},
     64,
     3e-4,
     5000,
     500,
     200},
    // nanoGPT's README, "I only have a macbook": train_shakespeare_char.py
    // with --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
    // --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0
    // --eval_iters=20; the rest below, in apply_preset.
    {"macbook",
     {.stage = Stage::GPT,
      .block_size = 64,
      .n_embd = 128,
      .n_head = 4,
      .n_layer = 4,
      .dropout = 0.0,
      .kind = ModelKind::NanoGPT},
     12,
     1e-3,
     2000,
     250,
     20},
};

void apply_preset(Options& o, const std::string& name) {
    for (const Preset& p : kPresets)
        if (name == p.name) {
            o.model = p.model;
            o.batch_size = p.batch_size;
            o.lr = p.lr;
            o.max_iters = p.max_iters;
            o.eval_interval = p.eval_interval;
            o.eval_iters = p.eval_iters;
            o.preset = name;
            // The schedule and AdamW: gpt.py's (constant lr, PyTorch's
            // defaults), except for nanoGPT's macbook run, which keeps
            // train_shakespeare_char.py's and train.py's values.
            const bool nanogpt = name == std::string("macbook");
            o.warmup_iters = nanogpt ? 100 : 0;
            o.lr_decay_iters = nanogpt ? 2000 : 0;
            o.min_lr = nanogpt ? 1e-4 : NAN;
            o.beta2 = nanogpt ? 0.99 : 0.999;
            o.weight_decay = nanogpt ? 0.1 : 1e-2;
            o.max_grad_norm = nanogpt ? 1.0 : INFINITY;
            return;
        }
    throw UsageError("--preset: unknown preset \"" + name +
                     "\" (bigram, embed, head, multihead, ffwd, blocks, layernorm, lecture, macbook)");
}

} // namespace

std::string usage() {
    return R"(usage: train_gpt [options]

Trains a GPT on characters (or BPE tokens) and writes a checkpoint, a loss curve
and a sample.
With no options it trains on a generated default corpus in a few minutes.

data and presets
  --data FILE            train on this text file (default: the generated play)
  --tokenizer NAME       train on BPE tokens instead of characters: gpt2 (GPT-2's
                         tokenizer, 50,257 tokens) or a .model file that
                         build/examples/tokenize train wrote
  --preset NAME          the lecture's stages: bigram, embed, head, multihead, ffwd,
                         blocks, layernorm, lecture (the 10.8M-parameter model);
                         macbook: nanoGPT's "I only have a macbook" run (with
                         --data data/tinyshakespeare.txt)
  --model fast|lecture|nanogpt
                         which model runs the GPT (the default run and --preset
                         lecture): the fast model with gpt.py's function and weights
                         (default), the lecture's classes, or nanoGPT's model.py
                         (GELU, tied weights, nanoGPT's initialisation; AdamW decays
                         only its 2-d tensors); the other stages always run the
                         lecture's classes
  --bias yes|no          nanogpt: biases in the Linears and LayerNorms (default no)
  --tie-weights yes|no   nanogpt: lm_head shares the token embedding (default yes)
model and training (override the preset)
  --n-embd N  --n-head N  --n-layer N  --block-size N  --dropout P
  --batch-size N  --lr X  --max-iters N  --eval-interval N  --eval-iters N
  --warmup-iters N       raise the learning rate linearly over the first N steps (default 0)
  --lr-decay-iters N     then lower it along a cosine, reaching --min-lr at step N
                         (default 0: no decay); nanoGPT's schedule
  --min-lr X             the learning rate after the decay (default: --lr / 10)
  --beta1 B  --beta2 B  --weight-decay W
                         AdamW's (default 0.9, 0.999, 0.01: PyTorch's, as gpt.py)
  --grad-accum N         add up the gradients of N batches before each step (default 1)
  --max-grad-norm X      clip the gradients' global norm to X (default: no clipping)
  --divergence-ratio R   stop (exit status 3) when the val loss rises above R times
                         its lowest so far (default 2); the checkpoints keep the
                         state before
  --seed N               the random seed (default 1337, the lecture's)
  --threads N            threads for the kernels
output
  --out DIR              where to write checkpoints, losses and plots (default out;
                         with --resume, the checkpoint's folder); a run refuses a
                         folder that holds another run's checkpoint
  --overwrite            start a new run in --out even though it holds a checkpoint
  --resume CKPT          continue a run from its checkpoint, OUT/train_gpt.safetensors
                         (the latest) or OUT/train_gpt.best.safetensors (the lowest
                         val loss); --lr, --max-grad-norm, --divergence-ratio may change
  --sample-only CKPT     only generate text from a checkpoint
  --sample-tokens N  --temperature T  --top-k K  --sample-seed N
  --attention-map FILE   where to draw the attention of every head (default OUT/attention.svg)
  --prompt TEXT          the text for the attention map (default: the first whole
                         line of the validation text that fits the block)
  --summary              print the model's layers, output shapes and parameter counts
                         (torchinfo's table) and exit without training
  --diagnostics          also write the makemore lectures' pictures: each layer's
                         activations and their gradients at the last step, the
                         weights' gradients, and every weight's update:data ratio at
                         every step (OUT/diagnostics_*.svg, OUT/diagnostics.csv)
  --help
)";
}

namespace {

// `value`, unless it is empty: an empty path (--resume "") must not quietly
// mean the default (a new run over the old checkpoint).
std::string not_empty(const std::string& flag, const std::string& value, const char* what) {
    if (value.empty()) throw UsageError(flag + " needs " + what + ", got an empty string");
    return value;
}

// "yes" or "no".
bool yes_no(const std::string& flag, const std::string& value) {
    if (value == "yes") return true;
    if (value == "no") return false;
    throw UsageError(flag + " expects yes or no, got \"" + value + "\"");
}

// A value in [0, 1), as AdamW's betas must be.
double unit_interval(const std::string& flag, const std::string& value) {
    const double x = flags::real(flag, value, 0);
    if (!(x < 1)) throw UsageError(flag + " must be below 1, got " + value);
    return x;
}

using Setter = std::function<void(const std::string&, const std::string&)>;

// What each flag that takes a value does with it, and the values it accepts:
// one table for the command line and for a checkpoint's settings.
std::map<std::string, Setter> setters(Options& o) {
    using flags::integer;
    using flags::positive;
    using flags::real;
    constexpr int64_t kBig = INT64_MAX;
    return {
        {"--preset", [](const std::string&, const std::string&) {}},
        {"--data", [&](auto& f, auto& v) { o.data_path = not_empty(f, v, "a text file"); }},
        {"--tokenizer", [&](auto& f, auto& v) { o.tokenizer = not_empty(f, v, "gpt2 or a .model file"); }},
        {"--model",
         [&](auto& f, auto& v) {
             try {
                 o.model.kind = kind_from_name(v);
             } catch (const std::invalid_argument& e) {
                 throw UsageError(f + ": " + e.what());
             }
         }},
        {"--bias", [&](auto& f, auto& v) { o.model.bias = yes_no(f, v); }},
        {"--tie-weights", [&](auto& f, auto& v) { o.model.tie_weights = yes_no(f, v); }},
        {"--n-embd", [&](auto& f, auto& v) { o.model.n_embd = integer(f, v, 1, kBig); }},
        {"--n-head", [&](auto& f, auto& v) { o.model.n_head = integer(f, v, 1, kBig); }},
        {"--n-layer", [&](auto& f, auto& v) { o.model.n_layer = integer(f, v, 0, kBig); }},
        {"--block-size", [&](auto& f, auto& v) { o.model.block_size = integer(f, v, 1, kBig); }},
        {"--dropout",
         [&](auto& f, auto& v) {
             o.model.dropout = real(f, v, 0, 1);
             if (o.model.dropout == 1) throw UsageError(f + " must be in [0, 1), got " + v);
         }},
        {"--batch-size", [&](auto& f, auto& v) { o.batch_size = integer(f, v, 1, kBig); }},
        {"--lr", [&](auto& f, auto& v) { o.lr = real(f, v, 0); }},
        {"--warmup-iters", [&](auto& f, auto& v) { o.warmup_iters = integer(f, v, 0, kBig); }},
        {"--lr-decay-iters", [&](auto& f, auto& v) { o.lr_decay_iters = integer(f, v, 0, kBig); }},
        {"--min-lr", [&](auto& f, auto& v) { o.min_lr = real(f, v, 0); }},
        {"--beta1", [&](auto& f, auto& v) { o.beta1 = unit_interval(f, v); }},
        {"--beta2", [&](auto& f, auto& v) { o.beta2 = unit_interval(f, v); }},
        {"--weight-decay", [&](auto& f, auto& v) { o.weight_decay = real(f, v, 0); }},
        {"--grad-accum", [&](auto& f, auto& v) { o.grad_accum = integer(f, v, 1, int64_t{1} << 20); }},
        {"--max-grad-norm", [&](auto& f, auto& v) { o.max_grad_norm = positive(f, v); }},
        {"--divergence-ratio",
         [&](auto& f, auto& v) {
             o.divergence_ratio = real(f, v, 1);
             if (o.divergence_ratio == 1) throw UsageError(f + " must be above 1, got " + v);
         }},
        {"--max-iters", [&](auto& f, auto& v) { o.max_iters = integer(f, v, 1, kBig); }},
        {"--eval-interval", [&](auto& f, auto& v) { o.eval_interval = integer(f, v, 1, kBig); }},
        {"--eval-iters", [&](auto& f, auto& v) { o.eval_iters = integer(f, v, 1, kBig); }},
        {"--seed", [&](auto& f, auto& v) { o.seed = flags::seed(f, v); }},
        {"--threads",
         [&](auto& f, auto& v) { o.threads = static_cast<int>(integer(f, v, 1, ember::max_num_threads())); }},
        {"--out", [&](auto& f, auto& v) { o.out_dir = not_empty(f, v, "a folder"); }},
        {"--resume", [&](auto& f, auto& v) { o.resume = not_empty(f, v, "a checkpoint file"); }},
        {"--sample-only", [&](auto& f, auto& v) { o.sample_only = not_empty(f, v, "a checkpoint file"); }},
        {"--sample-tokens", [&](auto& f, auto& v) { o.sample_tokens = integer(f, v, 0, kBig); }},
        {"--temperature",
         [&](auto& f, auto& v) {
             o.temperature = positive(f, v);
             // Dividing by less lets a logit of 3.4e32 overflow float32: it would be no temperature at all.
             if (o.temperature < kMinTemperature)
                 throw UsageError(f + " must be at least " + flags::format("%g", kMinTemperature) + ", got " + v +
                                  " (to always take the likeliest character, use --top-k 1)");
         }},
        {"--top-k", [&](auto& f, auto& v) { o.top_k = integer(f, v, 0, kBig); }},
        {"--sample-seed", [&](auto& f, auto& v) { o.sample_seed = flags::seed(f, v); }},
        {"--attention-map", [&](auto& f, auto& v) { o.attention_map = not_empty(f, v, "a file name"); }},
        {"--prompt", [&](auto& f, auto& v) { o.prompt = not_empty(f, v, "some text"); }},
    };
}

} // namespace

void set_option(Options& o, const std::string& flag, const std::string& value) {
    const auto all = setters(o);
    auto it = all.find(flag);
    if (it == all.end()) throw UsageError("unknown option " + flag);
    it->second(flag, value);
}

void check_options(const Options& o) {
    for (const char* flag : {"--bias", "--tie-weights"})
        if (o.given.count(flag) && o.model.kind != ModelKind::NanoGPT)
            throw UsageError(std::string(flag) + " is an option of the nanoGPT model (--model nanogpt)");
    if (o.lr_decay_iters > 0 && o.lr_decay_iters <= o.warmup_iters)
        throw UsageError("--lr-decay-iters (" + std::to_string(o.lr_decay_iters) +
                         ") must be past the warm-up, --warmup-iters (" + std::to_string(o.warmup_iters) + ")");
    if (!std::isnan(o.min_lr) && o.min_lr > o.lr)
        throw UsageError("--min-lr (" + flags::format("%g", o.min_lr) + ") must not exceed --lr (" +
                         flags::format("%g", o.lr) + ")");
    if (o.model.n_embd % o.model.n_head != 0)
        throw UsageError("--n-embd (" + std::to_string(o.model.n_embd) + ") must be divisible by --n-head (" +
                         std::to_string(o.model.n_head) + ")");
    if (o.model.stage != Stage::GPT && o.model.kind != ModelKind::Lecture)
        throw UsageError(std::string("--model: the ") + stage_name(o.model.stage) +
                         " stage runs the lecture's classes only; the fast model is gpt.py's whole GPT "
                         "(the default run and --preset lecture)");
}

bool parse_options(int argc, char** argv, Options& o) {
    const std::map<std::string, Setter> set = setters(o);
    std::set<std::string> value_flags;
    for (const auto& [flag, setter] : set) value_flags.insert(flag);
    const std::vector<flags::Flag> given =
        flags::parse(argc, argv, value_flags, {"--help", "--summary", "--overwrite", "--diagnostics"});
    for (const flags::Flag& flag : given)
        if (flag.name == "--help") {
            std::cout << usage();
            return false;
        }
    // The preset first, so that the other flags override it.
    apply_preset(o, "default");
    for (const flags::Flag& flag : given)
        if (flag.name == "--preset") apply_preset(o, flag.value);
    for (const flags::Flag& flag : given) {
        if (flag.name == "--summary") o.summary = true;
        else if (flag.name == "--overwrite") o.overwrite = true;
        else if (flag.name == "--diagnostics") o.diagnostics = true;
        else set.at(flag.name)(flag.name, flag.value);
        o.given.insert(flag.name);
    }
    if (!o.resume.empty() && !o.sample_only.empty()) throw UsageError("--resume and --sample-only exclude each other");
    // A resumed run's flags meet the checkpoint's settings, not the
    // defaults: the session checks them together.
    if (o.resume.empty()) check_options(o);
    return true;
}

} // namespace train
