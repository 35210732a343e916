// explore: the attention explorer for a train_gpt checkpoint and a prompt.
// Writes one self-contained HTML page (no network; open it from disk) with
// the head view, the model view, the query view, the next-token predictions
// with a temperature slider, and the run's loss curve and a sample, every
// number ember's (examples/train/explore.h). Any model train_gpt trains
// that attends: the lecture's stages, gpt.py's classes, the fast model and
// nanoGPT's. Docs: docs/explorer.md; tests: tests/explore_browser.py
// (its errors and every model's page; the page in headless Chromium).
//
//   build/examples/explore --checkpoint FILE --prompt TEXT [--out FILE.html]
//                          [--top-k N] [--layer L] [--weights-out FILE] [--threads N]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <ember.h>

#include "flags.h"
#include "train/evaluate.h"
#include "train/explore.h"
#include "train/memory.h"
#include "train/model.h"
#include "train/outputs.h"
#include "train/run_state.h"

using namespace ember;
using namespace train;
using flags::UsageError;

namespace {

const char* kUsage = R"(usage: explore --checkpoint FILE --prompt TEXT [options]

Writes the attention explorer, one HTML page that opens from disk in a
browser, for a train_gpt checkpoint and a prompt (docs/explorer.md).

  --checkpoint FILE    a checkpoint train_gpt wrote (out/train_gpt.safetensors)
  --prompt TEXT        the text to look at: 1 to block_size characters (tokens)
                       of the model's vocabulary
  --out FILE           the page to write (default explore.html)
  --top-k N            next tokens shown at each position (default 5)
  --layer L            the layer (from 1) whose q, k and v the query view holds
                       when every layer's would make the page large (default 1)
  --weights-out FILE   also write every head's weights as text, one query per
                       line: "layer head query w_0 ... w_query" (layers, heads
                       and queries from 0), for checks outside the page
  --threads N          threads for the kernels (default: every core)
)";

struct Args {
    std::string checkpoint, prompt, out = "explore.html", weights_out;
    int64_t top_k = 5, layer = 1, threads = 0; // threads 0: OpenMP's default
    bool prompt_given = false;
};

Args parse_args(int argc, char** argv, bool& help) {
    Args a;
    for (const flags::Flag& f :
         flags::parse(argc, argv,
                      {"--checkpoint", "--prompt", "--out", "--top-k", "--layer", "--weights-out", "--threads"},
                      {"--help"})) {
        if (f.name == "--help") help = true;
        else if (f.name == "--checkpoint") a.checkpoint = f.value;
        else if (f.name == "--prompt") a.prompt = f.value, a.prompt_given = true;
        else if (f.name == "--out") a.out = f.value;
        else if (f.name == "--weights-out") a.weights_out = f.value;
        else if (f.name == "--top-k") a.top_k = flags::integer(f.name, f.value, 1, 1000);
        else if (f.name == "--layer") a.layer = flags::integer(f.name, f.value, 1, 1000000);
        else if (f.name == "--threads") a.threads = flags::integer(f.name, f.value, 1, max_num_threads());
    }
    if (help) return a;
    if (a.checkpoint.empty()) throw UsageError("--checkpoint FILE is required (a checkpoint train_gpt wrote)");
    if (!a.prompt_given || a.prompt.empty()) throw UsageError("--prompt TEXT is required and may not be empty");
    return a;
}

// Every head's weights as text, "layer head query w_0 ... w_query", each
// float with 9 significant digits (enough to read back the same float).
void write_weights(const std::string& path, const Inside& inside) {
    std::ofstream out(path);
    if (!out) throw InputError("--weights-out " + path + ": cannot write it");
    for (size_t l = 0; l < inside.layers.size(); ++l) {
        const Tensor w = inside.layers[l].weights.contiguous(); // (NH,T,T)
        const int64_t NH = w.size(0), T = w.size(1);
        const float* p = w.data_ptr<float>();
        for (int64_t h = 0; h < NH; ++h)
            for (int64_t t = 0; t < T; ++t) {
                out << l << " " << h << " " << t;
                for (int64_t k = 0; k <= t; ++k) out << " " << flags::format("%.9g", p[(h * T + t) * T + k]);
                out << "\n";
            }
    }
    if (!out.flush()) throw InputError("--weights-out " + path + ": cannot write it");
}

int run(const Args& a) {
    if (a.threads > 0) set_num_threads(static_cast<int>(a.threads));
    RunState run;
    try {
        run = read_run(a.checkpoint);
    } catch (const std::exception& e) {
        throw InputError(std::string("--checkpoint: ") + e.what());
    }
    const ModelConfig& mc = run.options.model;
    if (!has_attention(mc))
        throw InputError("--checkpoint " + a.checkpoint + " holds a " + stage_name(mc.stage) +
                         " model, which has no attention to explore");
    std::vector<int64_t> ids;
    try {
        ids = run.vocab.encode(a.prompt);
    } catch (const std::invalid_argument& e) {
        throw InputError(std::string("--prompt: ") + e.what());
    }
    if (static_cast<int64_t>(ids.size()) > mc.block_size)
        throw InputError("--prompt has " + std::to_string(ids.size()) + " " + run.vocab.unit() +
                         "; the model reads at most block_size = " + std::to_string(mc.block_size));
    const std::string too_large =
        memory_problem(estimate_memory(mc, 1, 0), available_memory(), "the model of " + a.checkpoint);
    if (!too_large.empty()) throw InputError(too_large);
    check_writable(a.out, "--out");
    if (!a.weights_out.empty()) check_writable(a.weights_out, "--weights-out");

    auto model = make_model(mc);
    restore_run(a.checkpoint, *model, nullptr);
    ExploreOptions options{.top_k = a.top_k,
                           .layer = a.layer - 1,
                           .sample = sample(*model, run.vocab, run.options, mc.block_size),
                           .source = a.checkpoint + " (step " + std::to_string(run.next_step) + ")"};
    write_explore_page(a.out, *model, run, ids, options);
    if (!a.weights_out.empty()) write_weights(a.weights_out, look_inside(*model, from_vector(ids)));
    const std::string form = attention_form(mc);
    std::cout << "wrote " << a.out << " (" << std::filesystem::file_size(a.out) / 1024 << " KB): " << ids.size() << " "
              << run.vocab.unit() << ", " << form.substr(0, form.find(" (")) << "\n";
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        bool help = false;
        const Args a = parse_args(argc, argv, help);
        if (help) {
            std::cout << kUsage;
            return 0;
        }
        return run(a);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "explore: %s\n\n%s", e.what(), kUsage);
    } catch (const InputError& e) {
        std::fprintf(stderr, "explore: %s\n", e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "explore: %s\n", e.what());
        return 1;
    }
    return 2;
}
