// train_gpt checkpoints: see run_state.h. Layout: tensors "model.*",
// "optim.*", "rng_state" (the generator's 5056 bytes as int64s), "vocab"
// (the characters; with a BPE tokenizer every token's bytes, one after the
// other, and "vocab_lengths" each token's length), "step_losses", "eval_*";
// settings in the metadata (a BPE run's "tokenizer" among them).
#include "run_state.h"

#include <cstring>
#include <type_traits>

#include "guard.h"
#include "progress.h"

namespace train {

using namespace ember;

namespace {

const char* kFormat = "ember.train_gpt.v1";

nn::Metadata settings(const RunState& run) {
    const Options& o = run.options;
    const ModelConfig& m = o.model;
    nn::Metadata meta{{"format", kFormat},
                      {"preset", o.preset},
                      {"stage", stage_name(m.stage)},
                      {"block_size", std::to_string(m.block_size)},
                      {"n_embd", std::to_string(m.n_embd)},
                      {"n_head", std::to_string(m.n_head)},
                      {"n_layer", std::to_string(m.n_layer)},
                      {"dropout", std::to_string(m.dropout)},
                      {"model", kind_name(m.kind)},
                      {"bias", m.bias ? "yes" : "no"},
                      {"tie_weights", m.tie_weights ? "yes" : "no"},
                      {"batch_size", std::to_string(o.batch_size)},
                      {"lr", format("%.17g", o.lr)},
                      {"max_grad_norm", format("%.17g", o.max_grad_norm)},
                      {"warmup_iters", std::to_string(o.warmup_iters)},
                      {"lr_decay_iters", std::to_string(o.lr_decay_iters)},
                      {"beta1", format("%.17g", o.beta1)},
                      {"beta2", format("%.17g", o.beta2)},
                      {"weight_decay", format("%.17g", o.weight_decay)},
                      {"grad_accum", std::to_string(o.grad_accum)},
                      {"max_iters", std::to_string(o.max_iters)},
                      {"eval_interval", std::to_string(o.eval_interval)},
                      {"eval_iters", std::to_string(o.eval_iters)},
                      {"seed", std::to_string(o.seed)},
                      {"next_step", std::to_string(run.next_step)},
                      {"best_val", format("%.17g", run.best_val)},
                      {"best_step", std::to_string(run.best_step)},
                      {"best_file_step", std::to_string(run.best_file_step)},
                      {"best_file_val", format("%.17g", run.best_file_val)},
                      {"data", run.data_name},
                      {"data_fingerprint", std::to_string(run.data_fingerprint)}};
    // --min-lr only when given: without it the floor is lr / 10 of whatever
    // --lr a resumed run uses.
    if (!std::isnan(o.min_lr)) meta["min_lr"] = format("%.17g", o.min_lr);
    if (!run.vocab.is_chars()) meta["tokenizer"] = run.vocab.tokenizer();
    return meta;
}

// The metadata key of each setting a checkpoint holds, and the flag that sets it.
const std::pair<const char*, const char*> kSettingFlags[] = {
    {"block_size", "--block-size"},
    {"n_embd", "--n-embd"},
    {"n_head", "--n-head"},
    {"n_layer", "--n-layer"},
    {"dropout", "--dropout"},
    {"batch_size", "--batch-size"},
    {"lr", "--lr"},
    {"max_grad_norm", "--max-grad-norm"},
    {"max_iters", "--max-iters"},
    {"eval_interval", "--eval-interval"},
    {"eval_iters", "--eval-iters"},
    {"seed", "--seed"},
    // Files from before nanoGPT's schedule lack these: they keep the defaults.
    {"warmup_iters", "--warmup-iters"},
    {"lr_decay_iters", "--lr-decay-iters"},
    {"min_lr", "--min-lr"},
    {"beta1", "--beta1"},
    {"beta2", "--beta2"},
    {"weight_decay", "--weight-decay"},
    {"grad_accum", "--grad-accum"},
    {"bias", "--bias"},
    {"tie_weights", "--tie-weights"},
};

// The settings a train_gpt checkpoint may lack (written before they existed).
bool optional_setting(const std::string& key) {
    for (const char* k : {"max_grad_norm", "warmup_iters", "lr_decay_iters", "min_lr", "beta1", "beta2", "weight_decay",
                          "grad_accum", "bias", "tie_weights"})
        if (key == k) return true;
    return false;
}

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
    throw nn::SafetensorsError("[train_gpt] " + path + " is not a usable train_gpt checkpoint: " + what);
}

std::string field(const nn::Metadata& meta, const std::string& path, const std::string& key) {
    auto it = meta.find(key);
    if (it == meta.end()) bad_file(path, "no \"" + key + "\" in its metadata");
    return it->second;
}

// The metadata's number `key`, read by `parse` (std::stoll, std::stoull,
// std::stod), which must take all of it: "8x", "" or "x8" is not a number.
template <typename T>
T number_field(const nn::Metadata& meta, const std::string& path, const std::string& key,
               T (*parse)(const std::string&, size_t*)) {
    const std::string text = field(meta, path, key);
    try {
        // std::stoull would read "-1" as 2^64 - 1: an unsigned field takes no sign.
        if (!text.empty() && (std::is_signed_v<T> || text[0] != '-')) {
            size_t used = 0;
            T value = parse(text, &used);
            if (used == text.size()) return value;
        }
    } catch (const std::logic_error&) {
        // std::invalid_argument (no number at all) or std::out_of_range
    }
    bad_file(path, "\"" + key + "\" is not a number");
}

int64_t int_field(const nn::Metadata& meta, const std::string& path, const std::string& key) {
    return number_field<int64_t>(meta, path, key,
                                 [](const std::string& s, size_t* used) -> int64_t { return std::stoll(s, used); });
}

uint64_t unsigned_field(const nn::Metadata& meta, const std::string& path, const std::string& key) {
    return number_field<uint64_t>(meta, path, key,
                                  [](const std::string& s, size_t* used) -> uint64_t { return std::stoull(s, used); });
}

double real_field(const nn::Metadata& meta, const std::string& path, const std::string& key) {
    return number_field<double>(meta, path, key, [](const std::string& s, size_t* used) { return std::stod(s, used); });
}

// Tensor `key` of `all`: a vector of `dtype`, as train_gpt writes it.
const Tensor& history(const nn::StateDict& all, const std::string& path, const std::string& key, DType dtype) {
    if (!all.contains(key)) bad_file(path, "no \"" + key + "\" tensor");
    const Tensor& t = all.at(key);
    if (t.dtype() != dtype || t.dim() != 1)
        bad_file(path, "its \"" + key + "\" tensor is " + dtype_name(t.dtype()) + " " + shape_str(t.shape()) +
                           ", not a vector of " + dtype_name(dtype));
    return t;
}

// The tensors under `prefix`, with the prefix removed.
nn::StateDict with_prefix(const nn::StateDict& all, const std::string& prefix) {
    nn::StateDict out;
    for (const auto& [name, t] : all)
        if (name.rfind(prefix, 0) == 0) out.insert(name.substr(prefix.size()), t);
    return out;
}

} // namespace

void save_run(const std::string& path, const RunState& run, const nn::Module& model,
              const optim::Optimizer& optimizer) {
    save_run(path, run, model, optimizer, default_generator().get_state());
}

void save_run(const std::string& path, const RunState& run, const nn::Module& model, const optim::Optimizer& optimizer,
              const std::vector<uint8_t>& rng) {
    require_finite(model.state_dict(), path);
    require_finite(optimizer.state_dict(), path);
    nn::StateDict all;
    for (const auto& [name, t] : model.state_dict()) all.insert("model." + name, t);
    for (const auto& [name, t] : optimizer.state_dict()) all.insert("optim." + name, t);
    std::vector<int64_t> packed((rng.size() + 7) / 8, 0);
    std::memcpy(packed.data(), rng.data(), rng.size());
    all.insert("rng_state", from_vector(packed));
    std::vector<int64_t> vocab, lengths;
    for (const std::string& token : run.vocab.tokens()) {
        for (char c : token) vocab.push_back(static_cast<unsigned char>(c));
        lengths.push_back(static_cast<int64_t>(token.size()));
    }
    all.insert("vocab", from_vector(vocab, {static_cast<int64_t>(vocab.size())}, kInt64));
    if (!run.vocab.is_chars())
        all.insert("vocab_lengths", from_vector(lengths, {static_cast<int64_t>(lengths.size())}, kInt64));
    all.insert("step_losses", from_vector(run.step_losses, {static_cast<int64_t>(run.step_losses.size())}, kFloat64));
    std::vector<int64_t> eval_steps;
    std::vector<double> eval_train, eval_val;
    for (const EvalRecord& e : run.evals) {
        eval_steps.push_back(e.step);
        eval_train.push_back(e.train_loss);
        eval_val.push_back(e.val_loss);
    }
    all.insert("eval_steps", from_vector(eval_steps, {static_cast<int64_t>(eval_steps.size())}, kInt64));
    all.insert("eval_train", from_vector(eval_train, {static_cast<int64_t>(eval_train.size())}, kFloat64));
    all.insert("eval_val", from_vector(eval_val, {static_cast<int64_t>(eval_val.size())}, kFloat64));
    nn::save_safetensors(all, path, settings(run));
}

RunState read_run(const std::string& path) {
    nn::Metadata meta;
    nn::StateDict all = nn::load_safetensors(path, &meta);
    if (meta["format"] != kFormat)
        bad_file(path, "it was not written by train_gpt (format \"" + meta["format"] + "\")");
    RunState run;
    Options& o = run.options;
    o.preset = field(meta, path, "preset");
    try {
        o.model.stage = stage_from_name(field(meta, path, "stage"));
    } catch (const std::invalid_argument& e) {
        bad_file(path, e.what());
    }
    // Each setting passes the checks its flag passes on the command line
    // (eval_interval=0 would divide by zero, n_layer=1e8 build forever).
    for (const auto& [key, flag] : kSettingFlags) {
        const bool clipping = key == std::string("max_grad_norm");
        if (optional_setting(key) && !meta.count(key)) continue; // not in older files: the default
        const std::string value = field(meta, path, key);
        if (clipping && value == "inf") continue; // no clipping, the default
        try {
            set_option(o, flag, value);
        } catch (const UsageError& e) {
            bad_file(path, "\"" + std::string(key) + "\" = \"" + value + "\": " + e.what());
        }
    }
    // Which model the tensors are for; files from before the fast model hold the lecture's.
    try {
        o.model.kind = meta.count("model") ? kind_from_name(meta["model"]) : ModelKind::Lecture;
        check_options(o);
    } catch (const std::invalid_argument& e) {
        bad_file(path, e.what());
    }
    run.next_step = int_field(meta, path, "next_step");
    // The best so far; files from before these fields: found from the evaluations below.
    if (meta.count("best_step")) {
        run.best_val = real_field(meta, path, "best_val");
        run.best_step = int_field(meta, path, "best_step");
        run.best_file_step = int_field(meta, path, "best_file_step");
        run.best_file_val = real_field(meta, path, "best_file_val");
        if (run.best_step < -1 || run.best_step > run.next_step || run.best_file_step < -1 ||
            run.best_file_step > run.next_step || std::isnan(run.best_val) || std::isnan(run.best_file_val))
            bad_file(path, "its record of the best evaluation is inconsistent");
    }
    run.data_name = field(meta, path, "data");
    run.data_fingerprint = unsigned_field(meta, path, "data_fingerprint");
    // Every tensor read below has the dtype and shape train_gpt writes (a
    // file that says otherwise is refused here, not met as a DTypeError later).
    const Tensor& vocab = history(all, path, "vocab", kInt64);
    history(all, path, "rng_state", kInt64);
    const Tensor& losses = history(all, path, "step_losses", kFloat64);
    const Tensor& steps = history(all, path, "eval_steps", kInt64);
    const Tensor& tr = history(all, path, "eval_train", kFloat64);
    const Tensor& va = history(all, path, "eval_val", kFloat64);
    std::string chars;
    for (int64_t i = 0; i < vocab.numel(); ++i) {
        const int64_t byte = vocab.data_ptr<int64_t>()[i];
        if (byte < 0 || byte > 255) bad_file(path, "its vocabulary holds " + std::to_string(byte) + ", not a byte");
        chars += static_cast<char>(byte);
    }
    try {
        if (!meta.count("tokenizer")) {
            run.vocab = Vocab::from_chars(chars);
        } else { // BPE: the bytes of every token, cut at their lengths
            const Tensor& lengths = history(all, path, "vocab_lengths", kInt64);
            std::vector<std::string> tokens;
            size_t at = 0;
            for (int64_t i = 0; i < lengths.numel(); ++i) {
                const int64_t n = lengths.data_ptr<int64_t>()[i];
                if (n < 0 || static_cast<uint64_t>(n) > chars.size() - at)
                    bad_file(path, "its vocabulary's lengths do not add up to its bytes");
                tokens.push_back(chars.substr(at, static_cast<size_t>(n)));
                at += static_cast<size_t>(n);
            }
            if (at != chars.size()) bad_file(path, "its vocabulary's lengths do not add up to its bytes");
            run.vocab = Vocab::from_tokens(meta["tokenizer"], std::move(tokens));
            o.tokenizer = meta["tokenizer"];
        }
    } catch (const std::invalid_argument& e) {
        bad_file(path, e.what());
    }
    o.model.vocab_size = run.vocab.size();
    run.step_losses.assign(losses.data_ptr<double>(), losses.data_ptr<double>() + losses.numel());
    if (steps.numel() != tr.numel() || steps.numel() != va.numel())
        bad_file(path, "its evaluation history is inconsistent");
    for (int64_t i = 0; i < steps.numel(); ++i) {
        run.evals.push_back({steps.data_ptr<int64_t>()[i], tr.data_ptr<double>()[i], va.data_ptr<double>()[i]});
        if (!meta.count("best_step") && run.evals.back().val_loss < run.best_val)
            run.best_val = run.evals.back().val_loss, run.best_step = run.evals.back().step;
    }
    if (run.next_step < 0 || run.next_step != static_cast<int64_t>(run.step_losses.size()))
        bad_file(path, "its step count and loss history disagree");
    return run;
}

void restore_run(const std::string& path, nn::Module& model, optim::Optimizer* optimizer) {
    nn::StateDict all = nn::load_safetensors(path);
    // Check all three parts before changing any of them.
    nn::StateDict model_state = with_prefix(all, "model.");
    Tensor rng = all.at("rng_state");
    if (rng.numel() * 8 < 5056) bad_file(path, "its generator state is too short");
    std::vector<uint8_t> bytes(5056);
    std::memcpy(bytes.data(), rng.data_ptr<int64_t>(), bytes.size());
    Generator probe;
    try {
        probe.set_state(bytes);
    } catch (const Error& e) {
        bad_file(path, e.what());
    }
    try {
        model.load_state_dict(model_state);
        if (optimizer) optimizer->load_state_dict(with_prefix(all, "optim."));
    } catch (const Error& e) {
        bad_file(path, std::string("it does not fit the model: ") + e.what());
    }
    default_generator().set_state(bytes);
}

} // namespace train
