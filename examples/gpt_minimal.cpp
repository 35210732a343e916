// gpt_minimal: the "Let's build GPT" lecture's final gpt.py (karpathy/ng-video-lecture,
// commit 4c8e902: GPTLanguageModel, with _init_weights) as one short C++
// program, top to bottom in its order: read the text, encode it, get_batch,
// estimate_loss, the model (nn::GPTLanguageModel: gpt.py's classes), the AdamW loop, and
// a sample. train_gpt does the same with presets, checkpoints and plots;
// this file is the loop alone. docs/gpt.md walks it stage by stage; its
// PyTorch twin (gpt.py with these settings) is in tests/fixtures/fx_examples.py,
// and tests/test_examples.cpp checks that both print the same losses and text.
//
//   build/examples/gpt_minimal [TEXT] [--max-iters N] [--n-embd N] ...
//
// TEXT defaults to data/tinyshakespeare.txt (run from the repository). Each
// flag is one of gpt.py's hyperparameters, spelled with dashes (and
// --threads N, the threads for the kernels). The defaults
// train a 0.21 M-parameter model in seconds; gpt.py's own values, in the
// comments below, make the 10.8 M-parameter model that takes hours on a CPU:
//
//   build/examples/gpt_minimal --batch-size 64 --block-size 256 --max-iters 5000 --eval-interval 500
//       --learning-rate 3e-4 --eval-iters 200 --n-embd 384 --n-head 6 --n-layer 6 --dropout 0.2
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <ember.h>

#include "flags.h"

using namespace ember;

namespace {

// ---- hyperparameters -------------------------------------------------------------------
struct Hyperparameters {
    int64_t batch_size = 16;      // gpt.py: 64   independent sequences per step
    int64_t block_size = 32;      //         256  the longest context
    int64_t max_iters = 500;      //         5000
    int64_t eval_interval = 100;  //         500
    double learning_rate = 1e-3;  //         3e-4
    int64_t eval_iters = 20;      //         200  batches per loss estimate
    int64_t n_embd = 64;          //         384
    int64_t n_head = 4;           //         6
    int64_t n_layer = 4;          //         6
    double dropout = 0.0;         //         0.2
    int64_t max_new_tokens = 500; //         500  characters sampled at the end
    int64_t seed = 1337;          //         1337 torch.manual_seed
    int64_t threads = 0;          // (not gpt.py's) threads for the kernels; 0: OpenMP's default
};

// [TEXT] [--flag value]...: throws a UsageError (an invalid_argument) naming a bad flag or value.
std::string parse_args(int argc, char** argv, Hyperparameters& h) {
    const std::map<std::string, int64_t*> ints = {{"--batch-size", &h.batch_size},
                                                  {"--block-size", &h.block_size},
                                                  {"--max-iters", &h.max_iters},
                                                  {"--eval-interval", &h.eval_interval},
                                                  {"--eval-iters", &h.eval_iters},
                                                  {"--n-embd", &h.n_embd},
                                                  {"--n-head", &h.n_head},
                                                  {"--n-layer", &h.n_layer},
                                                  {"--max-new-tokens", &h.max_new_tokens},
                                                  {"--seed", &h.seed},
                                                  {"--threads", &h.threads}};
    const std::map<std::string, double*> reals = {{"--learning-rate", &h.learning_rate}, {"--dropout", &h.dropout}};
    std::set<std::string> known;
    for (const auto& [flag, target] : ints) known.insert(flag);
    for (const auto& [flag, target] : reals) known.insert(flag);
    std::vector<std::string> paths;
    for (const auto& [flag, value] : flags::parse(argc, argv, known, {}, &paths)) {
        if (ints.count(flag)) {
            const int64_t least = flag == "--seed" || flag == "--max-iters" || flag == "--max-new-tokens" ? 0 : 1;
            const int64_t most = flag == "--threads" ? max_num_threads() : INT64_MAX;
            *ints.at(flag) = flags::integer(flag, value, least, most);
        } else {
            *reals.at(flag) = flags::real(flag, value, 0);
        }
    }
    if (paths.size() > 1) throw flags::UsageError("one text file, please; got " + std::to_string(paths.size()));
    return paths.empty() ? "data/tinyshakespeare.txt" : paths[0];
}

// The whole text file, or an invalid_argument saying why not: missing or
// unreadable (the system's reason), or not a regular file (a folder, or a
// pipe or /dev/zero, which would never end).
std::string read_file(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0)
        throw std::invalid_argument("cannot read " + path + ": " + std::strerror(errno));
    if (!S_ISREG(info.st_mode)) throw std::invalid_argument(path + " is not a regular file; give a text file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::invalid_argument("cannot read " + path + ": " + std::strerror(errno));
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

} // namespace

// The program; main() turns a bad argument into a message and status 2.
int run(int argc, char** argv) {
    Hyperparameters h;
    std::string text = read_file(parse_args(argc, argv, h)); // with open('input.txt') as f: text = f.read()
    if (h.threads > 0) set_num_threads(static_cast<int>(h.threads));
    manual_seed(static_cast<uint64_t>(h.seed)); // torch.manual_seed(1337)

    // ---- the characters, as integers ----------------------------------------------------
    // chars = sorted(list(set(text))); stoi = { ch:i for i,ch in enumerate(chars) }
    // Characters are bytes: for ASCII text (tiny Shakespeare) that is Python's encoding.
    bool seen[256] = {};
    for (char c : text) seen[static_cast<unsigned char>(c)] = true;
    std::string chars;
    for (int c = 0; c < 256; ++c)
        if (seen[c]) chars += static_cast<char>(c);
    const int64_t vocab_size = static_cast<int64_t>(chars.size());
    std::vector<int64_t> stoi(256, -1);
    for (size_t i = 0; i < chars.size(); ++i) stoi[static_cast<unsigned char>(chars[i])] = static_cast<int64_t>(i);
    auto decode = [&](const Tensor& ids) { // decode = lambda l: ''.join([itos[i] for i in l])
        std::string out;
        for (int64_t i = 0; i < ids.numel(); ++i) out += chars[static_cast<size_t>(ids[i].item<int64_t>())];
        return out;
    };

    // data = torch.tensor(encode(text), dtype=torch.long); the first 90% trains, the rest validates.
    std::vector<int64_t> encoded;
    for (char c : text) encoded.push_back(stoi[static_cast<unsigned char>(c)]);
    Tensor data = from_vector(encoded);
    const int64_t n = static_cast<int64_t>(0.9 * static_cast<double>(data.numel())); // int(0.9*len(data))
    Tensor train_data = data.slice(0, 0, n), val_data = data.slice(0, n);
    if (val_data.numel() <= h.block_size)
        throw std::invalid_argument("the text is too short for --block-size " + std::to_string(h.block_size));

    // ---- get_batch: batch_size random windows of block_size characters, and the next ones ----
    auto get_batch = [&](const std::string& split) {
        const Tensor& d = split == "train" ? train_data : val_data;
        Tensor ix = randint(d.numel() - h.block_size, {h.batch_size}); // (B,) start positions
        std::vector<Tensor> xs, ys;
        for (int64_t b = 0; b < h.batch_size; ++b) {
            const int64_t i = ix[b].item<int64_t>();
            xs.push_back(d.slice(0, i, i + h.block_size));         // data[i:i+block_size]
            ys.push_back(d.slice(0, i + 1, i + h.block_size + 1)); // data[i+1:i+block_size+1]
        }
        return std::pair{stack(xs), stack(ys)}; // (B,T) each
    };

    // ---- the model: gpt.py's GPTLanguageModel (nn/gpt.h: its classes, line for line) ----
    nn::GPTLanguageModel model({.vocab_size = vocab_size,
                                .block_size = h.block_size,
                                .n_embd = h.n_embd,
                                .n_head = h.n_head,
                                .n_layer = h.n_layer,
                                .dropout = h.dropout});
    std::printf("%.6f M parameters\n", static_cast<double>(model.num_parameters()) / 1e6);

    // ---- estimate_loss: the mean loss of eval_iters batches per split, dropout off, no graph ----
    auto estimate_loss = [&]() {
        NoGradGuard no_grad; // @torch.no_grad()
        model.eval();
        std::map<std::string, double> out;
        for (const std::string split : {"train", "val"}) {
            Tensor losses = zeros({h.eval_iters});
            for (int64_t k = 0; k < h.eval_iters; ++k) {
                auto [X, Y] = get_batch(split);
                losses[k].fill_(model.forward(X, Y).loss.item());
            }
            out[split] = losses.mean().item();
        }
        model.train();
        return out;
    };

    // ---- the training loop ---------------------------------------------------------------
    optim::AdamW optimizer(model.parameters(), {.lr = h.learning_rate});
    for (int64_t iter = 0; iter < h.max_iters; ++iter) {
        // every once in a while evaluate the loss on train and val sets
        if (iter % h.eval_interval == 0 || iter == h.max_iters - 1) {
            auto losses = estimate_loss();
            std::printf("step %lld: train loss %.4f, val loss %.4f\n", static_cast<long long>(iter), losses["train"],
                        losses["val"]);
            std::fflush(stdout);
        }
        auto [xb, yb] = get_batch("train");
        Tensor loss = model.forward(xb, yb).loss; // logits, loss = model(xb, yb)
        optimizer.zero_grad();                    // optimizer.zero_grad(set_to_none=True)
        loss.backward();
        optimizer.step();
    }

    // ---- generate from the model, starting from token 0 (a newline in Shakespeare) -------
    // gpt.py samples with the model still in training mode (dropout on); eval() turns it off.
    model.eval();
    Tensor context = zeros({1, 1}, kInt64);
    std::cout << decode(model.generate(context, h.max_new_tokens)[0]) << "\n";
    return 0;
}

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::invalid_argument& e) { // a bad flag, value or file
        std::fprintf(stderr, "gpt_minimal: %s\n", e.what());
        return 2;
    } catch (const Error& e) { // a model ember refuses to build (n_head > n_embd, ...), or too large a one
        std::fprintf(stderr, "gpt_minimal: %s\n", e.what());
        return 2;
    } catch (const std::bad_alloc&) { // memory for something other than a tensor (the text, a vector)
        std::fprintf(stderr, "gpt_minimal: out of memory; use a smaller text or model\n");
        return 2;
    }
}
