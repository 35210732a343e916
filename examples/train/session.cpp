// Settings, data, model and header of a train_gpt run: see session.h.
#include "session.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "corpus.h"
#include "model.h"
#include "progress.h"

namespace train {

using namespace ember;

namespace {

const char* kGeneratedPlay = "(generated play)"; // the data_name of the default corpus

// The settings of a resumed run: the checkpoint's, which fix the model, the
// data and the batches, with what may change taken from the command line
// (output, threads, sampling, attention map, and a larger --max-iters).
Options resumed_options(const Options& given, const RunState& run) {
    for (const char* flag : {"--preset", "--n-embd", "--n-head", "--n-layer", "--block-size", "--dropout",
                             "--batch-size", "--lr", "--eval-interval", "--eval-iters", "--seed"})
        if (given.given.count(flag))
            throw UsageError(std::string(flag) + " cannot change when resuming (the checkpoint fixes it)");
    Options o = run.options;
    o.resume = given.resume;
    o.out_dir = given.out_dir;
    o.threads = given.threads;
    o.sample_tokens = given.sample_tokens;
    o.temperature = given.temperature;
    o.top_k = given.top_k;
    o.sample_seed = given.sample_seed;
    o.attention_map = given.attention_map;
    o.prompt = given.prompt;
    if (given.given.count("--max-iters")) o.max_iters = given.max_iters; // training longer is fine
    o.data_path = given.given.count("--data") ? given.data_path : run.data_name == kGeneratedPlay ? "" : run.data_name;
    return o;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot read data file " + path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    if (text.empty()) throw InputError("data file " + path + " is empty");
    return text;
}

// Each split must hold at least one block and its next character.
void check_lengths(const Splits& data, int64_t block_size) {
    for (const auto& [name, part] : {std::pair{"training", &data.train}, std::pair{"validation", &data.val}})
        if (part->numel() <= block_size)
            throw InputError(std::string("the ") + name + " text (" + std::to_string(part->numel()) +
                             " characters) is not longer than block_size=" + std::to_string(block_size) +
                             "; use a longer text or a smaller --block-size");
}

void print_header(const Session& s, size_t text_chars) {
    const Options& o = s.run.options;
    const int64_t vocab_size = s.run.vocab.size();
    std::cout << "data: " << s.run.data_name << ", " << text_chars << " characters, vocabulary of " << vocab_size
              << "\n";
    std::cout << "model: " << o.preset << " (" << stage_name(o.model.stage) << "), "
              << format("%.6f M parameters", static_cast<double>(s.model->num_parameters()) / 1e6) << "\n";
    std::cout << "expected starting loss ln(" << vocab_size << ") = " << format("%.4f", std::log(double(vocab_size)))
              << "\n";
    if (s.run.next_step > 0) std::cout << "resuming at step " << s.run.next_step << " from " << o.resume << "\n";
    std::cout << std::flush; // a log file shows the header before the first, possibly slow, evaluation
}

} // namespace

Session start_session(Options o) {
    Session s;
    RunState& run = s.run;
    if (!o.resume.empty()) {
        run = read_run(o.resume);
        o = resumed_options(o, run);
    }

    // ---- data ---------------------------------------------------------------------------
    std::string text = o.data_path.empty() ? default_corpus() : read_text(o.data_path);
    Vocab vocab = Vocab::from_text(text);
    if (!o.resume.empty()) {
        if (fingerprint(text) != run.data_fingerprint || vocab.chars() != run.vocab.chars())
            throw InputError("the checkpoint was trained on other data than " +
                             (o.data_path.empty() ? std::string("the generated play") : o.data_path));
    }
    o.model.vocab_size = vocab.size();
    run.options = o;
    run.vocab = vocab;
    run.data_fingerprint = fingerprint(text);
    run.data_name = o.data_path.empty() ? kGeneratedPlay : o.data_path;
    s.data = split_90_10(from_vector(vocab.encode(text)));
    check_lengths(s.data, o.model.block_size);
    if (!o.attention_map.empty() && !has_attention(o.model.stage))
        throw UsageError(std::string("--attention-map: the ") + stage_name(o.model.stage) + " model has no attention");

    // ---- model and optimiser (drawing from the seeded generator, as the lecture) --------
    manual_seed(o.seed);
    s.model = make_model(o.model);
    s.optimizer = std::make_unique<optim::AdamW>(s.model->parameters(), optim::AdamWOptions{.lr = o.lr});
    if (!o.resume.empty()) restore_run(o.resume, *s.model, s.optimizer.get());
    std::filesystem::create_directories(o.out_dir);
    s.checkpoint = o.out_dir + "/train_gpt.safetensors";

    print_header(s, text.size());
    if (run.next_step >= o.max_iters)
        throw UsageError("the checkpoint already ran " + std::to_string(run.next_step) +
                         " steps; pass a larger --max-iters to train longer");
    return s;
}

} // namespace train
