// train_gpt's flags and presets: see options.h.
#include "options.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <vector>

namespace train {

namespace {

// The lecture's settings for each stage (bigram.py, the v2.py stages of the
// video, gpt.py), and ember's default run on its generated corpus.
void apply_preset(Options& o, const std::string& name) {
    ModelConfig& m = o.model;
    if (name == "default") {
        m = {.stage = Stage::GPT, .block_size = 64, .n_embd = 64, .n_head = 4, .n_layer = 3, .dropout = 0.0};
        o.batch_size = 32;
        o.lr = 2e-3;
        o.max_iters = 1000;
        o.eval_interval = 100;
        o.eval_iters = 20;
    } else if (name == "bigram") {
        m = {.stage = Stage::Bigram, .block_size = 8};
        o.batch_size = 32;
        o.lr = 1e-2;
        o.max_iters = 3000;
        o.eval_interval = 300;
        o.eval_iters = 200;
    } else if (name == "embed") {
        // The lecture adds the embeddings with the bigram's settings, before attention.
        m = {.stage = Stage::Embed, .block_size = 8, .n_embd = 32};
        o.batch_size = 32;
        o.lr = 1e-2;
        o.max_iters = 3000;
        o.eval_interval = 300;
        o.eval_iters = 200;
    } else if (name == "head" || name == "multihead" || name == "ffwd" || name == "blocks" || name == "layernorm") {
        Stage stage = name == "head"        ? Stage::Head
                      : name == "multihead" ? Stage::MultiHead
                      : name == "ffwd"      ? Stage::FeedForward
                      : name == "blocks"    ? Stage::Blocks
                                            : Stage::LayerNorm;
        m = {.stage = stage,
             .block_size = 8,
             .n_embd = 32,
             .n_head = name == "head" ? 1 : 4,
             .n_layer = 3,
             .dropout = 0.0};
        o.batch_size = 32;
        o.lr = 1e-3;
        o.max_iters = 5000;
        o.eval_interval = 500;
        o.eval_iters = 200;
    } else if (name == "lecture") {
        m = {.stage = Stage::GPT, .block_size = 256, .n_embd = 384, .n_head = 6, .n_layer = 6, .dropout = 0.2};
        o.batch_size = 64;
        o.lr = 3e-4;
        o.max_iters = 5000;
        o.eval_interval = 500;
        o.eval_iters = 200;
    } else {
        throw UsageError("--preset: unknown preset \"" + name +
                         "\" (bigram, embed, head, multihead, ffwd, blocks, layernorm, lecture)");
    }
    o.preset = name;
}

template <typename T>
T number(const std::string& flag, const std::string& text) {
    T value{};
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size())
        throw UsageError(flag + " expects a number, got \"" + text + "\"");
    return value;
}

double real(const std::string& flag, const std::string& text) {
    try {
        size_t used = 0;
        double v = std::stod(text, &used);
        if (used == text.size()) return v;
    } catch (const std::exception&) {
    }
    throw UsageError(flag + " expects a number, got \"" + text + "\"");
}

void at_least(const std::string& flag, double value, double low) {
    if (!(value >= low)) throw UsageError(flag + " must be at least " + std::to_string(static_cast<int64_t>(low)));
}

// A positive, finite number (a rate, a norm).
double positive(const std::string& flag, const std::string& text) {
    double value = real(flag, text);
    if (!(value > 0) || !std::isfinite(value))
        throw UsageError(flag + " must be a positive number, got \"" + text + "\"");
    return value;
}

} // namespace

std::string usage() {
    return R"(usage: train_gpt [options]

Trains a character-level GPT and writes a checkpoint, a loss curve and a sample.
With no options it trains on a generated default corpus in a few minutes.

data and presets
  --data FILE            train on this text file (default: the generated play)
  --preset NAME          the lecture's stages: bigram, embed, head, multihead, ffwd,
                         blocks, layernorm, lecture (the 10.8M-parameter model)
  --model fast|lecture   which model runs gpt.py's GPT (the default run and --preset
                         lecture): the fast model (default) or the lecture's classes;
                         the other stages always run the lecture's classes
model and training (override the preset)
  --n-embd N  --n-head N  --n-layer N  --block-size N  --dropout P
  --batch-size N  --lr X  --max-iters N  --eval-interval N  --eval-iters N
  --max-grad-norm X      clip the gradients' global norm to X (default: no clipping)
  --seed N               the random seed (default 1337, the lecture's)
  --threads N            threads for the kernels
output
  --out DIR              where to write checkpoint, losses and plots (default out)
  --resume CKPT          continue a run from its checkpoint (--lr, --max-grad-norm may change)
  --sample-only CKPT     only generate text from a checkpoint
  --sample-tokens N  --temperature T  --top-k K  --sample-seed N
  --attention-map FILE   where to draw the attention of every head (default OUT/attention.svg)
  --prompt TEXT          the text for the attention map
  --summary              print the model's layers, output shapes and parameter counts
                         (torchinfo's table) and exit without training
  --help
)";
}

bool parse_options(int argc, char** argv, Options& o) {
    // What each flag does with its value, applied once all are read (below).
    const std::map<std::string, std::function<void(const std::string&, const std::string&)>> setters = {
        {"--preset", [](const std::string&, const std::string&) {}},
        {"--data", [&](auto&, auto& v) { o.data_path = v; }},
        {"--model",
         [&](auto& f, auto& v) {
             try {
                 o.model.kind = kind_from_name(v);
             } catch (const std::invalid_argument& e) {
                 throw UsageError(f + ": " + e.what());
             }
         }},
        {"--n-embd",
         [&](auto& f, auto& v) {
             o.model.n_embd = number<int64_t>(f, v);
             at_least(f, o.model.n_embd, 1);
         }},
        {"--n-head",
         [&](auto& f, auto& v) {
             o.model.n_head = number<int64_t>(f, v);
             at_least(f, o.model.n_head, 1);
         }},
        {"--n-layer",
         [&](auto& f, auto& v) {
             o.model.n_layer = number<int64_t>(f, v);
             at_least(f, o.model.n_layer, 0);
         }},
        {"--block-size",
         [&](auto& f, auto& v) {
             o.model.block_size = number<int64_t>(f, v);
             at_least(f, o.model.block_size, 1);
         }},
        {"--dropout",
         [&](auto& f, auto& v) {
             o.model.dropout = real(f, v);
             if (!(o.model.dropout >= 0 && o.model.dropout < 1)) throw UsageError(f + " must be in [0, 1)");
         }},
        {"--batch-size",
         [&](auto& f, auto& v) {
             o.batch_size = number<int64_t>(f, v);
             at_least(f, o.batch_size, 1);
         }},
        {"--lr",
         [&](auto& f, auto& v) {
             o.lr = real(f, v);
             at_least(f, o.lr, 0);
             if (!std::isfinite(o.lr)) throw UsageError(f + " must be a finite number, got \"" + v + "\"");
         }},
        {"--max-grad-norm", [&](auto& f, auto& v) { o.max_grad_norm = positive(f, v); }},
        {"--max-iters",
         [&](auto& f, auto& v) {
             o.max_iters = number<int64_t>(f, v);
             at_least(f, o.max_iters, 1);
         }},
        {"--eval-interval",
         [&](auto& f, auto& v) {
             o.eval_interval = number<int64_t>(f, v);
             at_least(f, o.eval_interval, 1);
         }},
        {"--eval-iters",
         [&](auto& f, auto& v) {
             o.eval_iters = number<int64_t>(f, v);
             at_least(f, o.eval_iters, 1);
         }},
        {"--seed", [&](auto& f, auto& v) { o.seed = number<uint64_t>(f, v); }},
        {"--threads",
         [&](auto& f, auto& v) {
             o.threads = number<int>(f, v);
             at_least(f, o.threads, 1);
         }},
        {"--out", [&](auto&, auto& v) { o.out_dir = v; }},
        {"--resume", [&](auto&, auto& v) { o.resume = v; }},
        {"--sample-only", [&](auto&, auto& v) { o.sample_only = v; }},
        {"--sample-tokens",
         [&](auto& f, auto& v) {
             o.sample_tokens = number<int64_t>(f, v);
             at_least(f, o.sample_tokens, 0);
         }},
        {"--temperature",
         [&](auto& f, auto& v) {
             o.temperature = real(f, v);
             if (!(o.temperature > 0)) throw UsageError(f + " must be positive");
         }},
        {"--top-k",
         [&](auto& f, auto& v) {
             o.top_k = number<int64_t>(f, v);
             at_least(f, o.top_k, 0);
         }},
        {"--sample-seed", [&](auto& f, auto& v) { o.sample_seed = number<uint64_t>(f, v); }},
        {"--attention-map", [&](auto&, auto& v) { o.attention_map = v; }},
        {"--prompt", [&](auto&, auto& v) { o.prompt = v; }},
        {"--summary", [&](auto&, auto&) { o.summary = true; }},
    };
    const std::set<std::string> switches = {"--help", "--summary"};
    // First the flags and their values, each flag known before it takes one,
    // so that a mistyped flag is what the error names (not the word after it).
    std::vector<std::pair<std::string, std::string>> flags; // (flag, value)
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg.rfind("--", 0) != 0)
            throw UsageError("unexpected argument \"" + arg + "\" (options start with --, and each takes one value)");
        std::string value;
        const size_t eq = arg.find('=');
        if (eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        }
        if (!setters.count(arg) && !switches.count(arg)) throw UsageError("unknown option " + arg);
        if (eq == std::string::npos && !switches.count(arg)) {
            if (i + 1 >= argc) throw UsageError(arg + " needs a value");
            value = argv[++i];
        }
        flags.emplace_back(arg, value);
    }
    for (const auto& [flag, value] : flags)
        if (flag == "--help") {
            std::cout << usage();
            return false;
        }
    // The preset first, so that the other flags override it.
    apply_preset(o, "default");
    for (const auto& [flag, value] : flags)
        if (flag == "--preset") apply_preset(o, value);
    for (const auto& [flag, value] : flags) {
        if (flag == "--help") continue;
        setters.at(flag)(flag, value);
        o.given.insert(flag);
    }
    if (o.model.n_embd % o.model.n_head != 0)
        throw UsageError("--n-embd (" + std::to_string(o.model.n_embd) + ") must be divisible by --n-head (" +
                         std::to_string(o.model.n_head) + ")");
    if (!o.resume.empty() && !o.sample_only.empty()) throw UsageError("--resume and --sample-only exclude each other");
    if (o.given.count("--model") && o.model.stage != Stage::GPT)
        throw UsageError(std::string("--model: the ") + stage_name(o.model.stage) +
                         " stage runs the lecture's classes only; the fast model is gpt.py's whole GPT "
                         "(the default run and --preset lecture)");
    return true;
}

} // namespace train
