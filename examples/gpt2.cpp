// gpt2: run a GPT-2 checkpoint that a learner brings (nn/pretrained.h):
//
//   build/examples/gpt2 --model DIR --prompt "Hello, my dog"   sample, streamed
//   build/examples/gpt2 --model DIR --eval data/tinyshakespeare.txt
//   build/examples/gpt2 --model DIR --finetune data/tinyshakespeare.txt --out DIR2
//
// DIR holds config.json and model.safetensors, as Hugging Face publishes
// GPT-2 (openai-community/gpt2, gpt2-medium, ...) or as
// examples/nanogpt_to_safetensors.py converts a nanoGPT checkpoint.
// Sampling runs the prompt once, then each new token alone against the
// key/value cache (docs/kv_cache.md), and prints each token as soon as its
// bytes make whole UTF-8 characters. --eval prints the mean next-token
// cross-entropy over a text file (nn::fast::text_loss). --finetune trains
// the checkpoint further on a text, as nanoGPT's finetune_shakespeare.py
// does, and writes it in the layout it was read in, each time the
// validation loss improves. docs/gpt2.md; tests:
// tests/test_gpt2_program.cpp.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <ember.h>

#include "flags.h"
#include "open_tokenizer.h"
#include "train/data.h"

using namespace ember;
using flags::UsageError;

namespace {

const char* kUsage =
    R"(usage: gpt2 --model DIR (--prompt TEXT | --eval TEXTFILE | --finetune TEXTFILE --out DIR2) [options]

Runs a GPT-2 checkpoint: DIR holds config.json and model.safetensors, as
Hugging Face publishes GPT-2 or as examples/nanogpt_to_safetensors.py
converts a nanoGPT checkpoint (docs/gpt2.md).

  --prompt TEXT        sample a continuation of TEXT, printed as it is drawn,
                       then the speed in tokens/s. An empty prompt starts
                       from <|endoftext|> (GPT-2's tokenizer only)
  --max-new-tokens N   tokens to sample (default 100)
  --temperature T      divide the logits by T before sampling (default 1.0)
  --top-k K            draw only from the K most likely tokens
  --top-p P            draw only from the most likely tokens whose
                       probabilities first reach P (nucleus sampling)
  --seed S             the generator's seed (default 1337)
  --no-cache           run the whole context again for every token
  --eval TEXTFILE      print the mean next-token cross-entropy over the file's
                       tokens, in chunks of n_positions + 1 that overlap by one
  --finetune TEXTFILE  train the model further on the file's tokens (the
                       first 90% for training, the rest for validation), as
                       nanoGPT's finetune_shakespeare.py: AdamW (betas 0.9,
                       0.95, weight decay 0.1 on the matrices), gradients
                       clipped at 1.0, a constant learning rate. Prints the
                       losses; writes DIR2 in the model's layout each time
                       the validation loss improves
  --out DIR2           where --finetune writes (refused if it holds a
                       checkpoint, unless --overwrite)
  --iters N            optimizer steps (default 20)
  --batch-size B       sequences per micro-batch (default 1)
  --grad-accum N       micro-batches per step (default 4)
  --block-size T       tokens per sequence (default: 256 or n_positions if less)
  --lr X               learning rate (default 3e-5)
  --dropout P          dropout while finetuning (default 0.0)
  --eval-interval N    estimate both losses every N steps (default 5)
  --eval-iters N       batches per estimate (default 10)
  --overwrite          let --finetune replace the checkpoint in DIR2
  --tokenizer NAME     gpt2: GPT-2's tokenizer (the default); chars:TEXTFILE:
                       one token per distinct character of TEXTFILE, sorted
                       (nanoGPT's shakespeare_char, gpt.py); or a .model file
                       that tokenize train wrote
  --threads N          threads for the kernels (default: every core)
  --help
)";

struct Options {
    std::string model, prompt, eval, tokenizer = "gpt2";
    bool sample = false, use_cache = true;
    int64_t max_new_tokens = 100, threads = 0;
    // --finetune
    std::string finetune, out;
    bool overwrite = false;
    int64_t iters = 20, batch_size = 1, grad_accum = 4, block_size = 0, eval_interval = 5,
            eval_iters = 10; // 0: the default
    double lr = 3e-5, dropout = 0.0;
    uint64_t seed = 1337;
    double temperature = 1.0;
    std::optional<int64_t> top_k;
    std::optional<double> top_p;
};

Options parse(int argc, char** argv) {
    const auto given =
        flags::parse(argc, argv, {"--model",       "--prompt", "--eval",    "--tokenizer",     "--max-new-tokens",
                                  "--temperature", "--top-k",  "--top-p",   "--seed",          "--threads",
                                  "--finetune",    "--out",    "--iters",   "--batch-size",    "--grad-accum",
                                  "--block-size",  "--lr",     "--dropout", "--eval-interval", "--eval-iters"},
                     {"--help", "--no-cache", "--overwrite"});
    Options o;
    for (const flags::Flag& f : given) {
        if (f.name == "--help") {
            std::cout << kUsage;
            std::exit(0);
        }
        if (f.name == "--model") {
            o.model = f.value;
        } else if (f.name == "--prompt") {
            o.prompt = f.value;
            o.sample = true;
        } else if (f.name == "--eval") o.eval = f.value;
        else if (f.name == "--tokenizer") o.tokenizer = f.value;
        else if (f.name == "--max-new-tokens") o.max_new_tokens = flags::integer(f.name, f.value, 0, 1 << 20);
        else if (f.name == "--temperature") o.temperature = flags::real(f.name, f.value, 1e-6, 1e6);
        else if (f.name == "--top-k") o.top_k = flags::integer(f.name, f.value, 1, INT32_MAX);
        else if (f.name == "--top-p") o.top_p = flags::real(f.name, f.value, 1e-9, 1.0);
        else if (f.name == "--seed") o.seed = flags::seed(f.name, f.value);
        else if (f.name == "--threads") o.threads = flags::integer(f.name, f.value, 1, max_num_threads());
        else if (f.name == "--no-cache") o.use_cache = false;
        else if (f.name == "--finetune") o.finetune = f.value;
        else if (f.name == "--out") o.out = f.value;
        else if (f.name == "--overwrite") o.overwrite = true;
        else if (f.name == "--iters") o.iters = flags::integer(f.name, f.value, 1, 1 << 30);
        else if (f.name == "--batch-size") o.batch_size = flags::integer(f.name, f.value, 1, 1 << 20);
        else if (f.name == "--grad-accum") o.grad_accum = flags::integer(f.name, f.value, 1, 1 << 20);
        else if (f.name == "--block-size") o.block_size = flags::integer(f.name, f.value, 1, 1 << 20);
        else if (f.name == "--lr") o.lr = flags::real(f.name, f.value, 0.0, 1.0);
        else if (f.name == "--dropout") o.dropout = flags::real(f.name, f.value, 0.0, 0.99);
        else if (f.name == "--eval-interval") o.eval_interval = flags::integer(f.name, f.value, 1, 1 << 30);
        else if (f.name == "--eval-iters") o.eval_iters = flags::integer(f.name, f.value, 1, 1 << 20);
    }
    if (o.model.empty()) throw UsageError("--model DIR is required (a folder with config.json and model.safetensors)");
    if (int(o.sample) + int(!o.eval.empty()) + int(!o.finetune.empty()) != 1)
        throw UsageError("give one of --prompt TEXT, --eval TEXTFILE and --finetune TEXTFILE");
    if (!o.finetune.empty() && o.out.empty()) throw UsageError("--finetune needs --out DIR2, where to write the model");
    if (o.finetune.empty() && !o.out.empty()) throw UsageError("--out is for --finetune");
    return o;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The length of the longest prefix of `bytes` that does not end inside a
// UTF-8 character: a token may hold half of one (an emoji is often two
// tokens), so its bytes wait until the character is whole.
size_t whole_characters(const std::string& bytes) {
    const size_t n = bytes.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const auto c = static_cast<unsigned char>(bytes[n - back]);
        if ((c & 0xC0) == 0x80) continue; // a continuation byte: look further back
        const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return length > back ? n - back : n; // a lead byte still waiting for its continuation
    }
    return n;
}

// Samples o.max_new_tokens tokens after the prompt, printing each as it comes.
void sample(nn::fast::GPT& model, const AnyTokenizer& tok, const Options& o) {
    std::vector<int> prompt = tok.encode(o.prompt);
    if (prompt.empty()) {
        if (!tok.is_gpt2) throw UsageError("--prompt is empty; give some text to continue");
        prompt = {tokenizer::GPT2Tokenizer::kEndOfText}; // GPT-2 starts every document after <|endoftext|>
    }
    const int64_t block = model.config.block_size;
    std::vector<int64_t> ids(prompt.begin(), prompt.end());
    if (static_cast<int64_t>(ids.size()) > block) {
        std::fprintf(stderr, "gpt2: the prompt's %zu tokens are more than n_positions (%lld); keeping the last %lld\n",
                     ids.size(), static_cast<long long>(block), static_cast<long long>(block));
        ids.erase(ids.begin(), ids.end() - block);
    }
    std::cout << o.prompt << std::flush;
    manual_seed(o.seed);
    NoGradGuard no_grad;
    model.eval();
    nn::fast::KVCache cache = model.make_cache(1);
    std::string pending; // bytes of a character not yet whole
    const auto start = std::chrono::steady_clock::now();
    double prompt_seconds = 0;
    for (int64_t i = 0; i < o.max_new_tokens; ++i) {
        const int64_t T = static_cast<int64_t>(ids.size());
        Tensor logits; // (1, positions run, vocab_size)
        if (o.use_cache && cache.length > 0 && T == cache.length + 1 && T <= block) {
            // the one new token, against the keys and values of those before it
            logits = model.forward(from_vector(std::vector<int64_t>{ids.back()}, {1, 1}), cache);
        } else {
            // the prompt; or, once the context is longer than n_positions,
            // its last n_positions tokens, all again (every position moved)
            const int64_t from = std::max<int64_t>(0, T - block);
            Tensor context = from_vector(std::vector<int64_t>(ids.begin() + from, ids.end()), {1, T - from});
            cache.length = 0;
            logits = o.use_cache ? model.forward(context, cache) : model.forward(context);
        }
        if (i == 0) prompt_seconds = seconds_since(start);
        Tensor last = logits.select(1, -1); // (1,V)
        // A model may have more rows than the tokenizer has tokens (nanoGPT
        // pads GPT-2's 50,257 to 50,304): those are never drawn.
        if (tok.vocab_size < last.size(1)) last = last.slice(1, 0, tok.vocab_size);
        Tensor next = nn::sample_next(last, o.temperature, o.top_k, nullptr, o.top_p); // (1,1)
        ids.push_back(next.item<int64_t>());
        pending += tok.decode_bytes({static_cast<int>(ids.back())});
        const size_t whole = whole_characters(pending);
        std::cout << tokenizer::utf8_replace_invalid(pending.substr(0, whole)) << std::flush;
        pending.erase(0, whole);
    }
    std::cout << tokenizer::utf8_replace_invalid(pending) << "\n";
    const double total = seconds_since(start);
    const double rest = total - prompt_seconds;
    std::cout << flags::format("---\n%lld tokens in %.2f s: the prompt's %zu tokens in %.2f s, then %.1f tokens/s%s\n",
                               static_cast<long long>(o.max_new_tokens), total, prompt.size(), prompt_seconds,
                               o.max_new_tokens > 1 ? static_cast<double>(o.max_new_tokens - 1) / rest : 0.0,
                               o.use_cache ? " (with the key/value cache)" : " (no cache)");
}

void evaluate(nn::fast::GPT& model, const AnyTokenizer& tok, const Options& o) {
    const std::string text = flags::read_file(o.eval);
    auto start = std::chrono::steady_clock::now();
    const std::vector<int> encoded = tok.encode(text);
    const std::vector<int64_t> ids(encoded.begin(), encoded.end());
    std::cout << flags::format("%s: %zu bytes, %zu tokens (encoded in %.1f s)\n", o.eval.c_str(), text.size(),
                               ids.size(), seconds_since(start));
    start = std::chrono::steady_clock::now();
    nn::fast::TextLoss loss = nn::fast::text_loss(model, ids, [&](int64_t done, int64_t total) {
        std::fprintf(stderr, "\r%lld/%lld tokens", static_cast<long long>(done), static_cast<long long>(total));
    });
    std::fprintf(stderr, "\r");
    std::cout << flags::format("mean cross-entropy %.4f nats/token (perplexity %.2f) over %lld predicted tokens "
                               "in %lld chunk%s of up to %lld, %.1f s\n",
                               loss.mean, std::exp(loss.mean), static_cast<long long>(loss.tokens),
                               static_cast<long long>(loss.chunks), loss.chunks == 1 ? "" : "s",
                               static_cast<long long>(model.config.block_size), seconds_since(start));
}

// Both losses, each the mean over o.eval_iters random batches (nanoGPT's estimate_loss).
std::pair<double, double> estimate_loss(nn::fast::GPT& model, const train::Splits& data, const Options& o) {
    NoGradGuard no_grad;
    model.eval();
    double mean[2] = {0, 0};
    for (int split = 0; split < 2; ++split)
        for (int64_t k = 0; k < o.eval_iters; ++k) {
            auto [x, y] = train::get_batch(split == 0 ? data.train : data.val, o.batch_size, o.block_size);
            mean[split] += model.forward(x, y).loss.item() / static_cast<double>(o.eval_iters);
        }
    model.train();
    return {mean[0], mean[1]};
}

// nanoGPT's training loop as finetune_shakespeare.py configures it.
void finetune(nn::fast::GPT& model, nn::fast::Layout layout, const AnyTokenizer& tok, const Options& o) {
    // As nanoGPT's prepare.py for Shakespeare: the text split at 90% of its
    // characters, then each part encoded (tiny Shakespeare: 301,966 and
    // 36,059 GPT-2 tokens).
    const std::string text = flags::read_file(o.finetune);
    size_t characters = 0, split = 0;
    for (unsigned char c : text) characters += (c & 0xC0) != 0x80; // UTF-8 lead bytes
    for (size_t seen = 0; split < text.size(); ++split)
        if ((static_cast<unsigned char>(text[split]) & 0xC0) != 0x80 &&
            seen++ == static_cast<size_t>(0.9 * static_cast<double>(characters)))
            break; // int(0.9 * n)
    auto tokens = [&](const std::string& part) {
        const std::vector<int> ids = tok.encode(part);
        return from_vector(std::vector<int64_t>(ids.begin(), ids.end()));
    };
    const train::Splits data{tokens(text.substr(0, split)), tokens(text.substr(split))};
    if (data.train.numel() <= o.block_size || data.val.numel() <= o.block_size)
        throw std::invalid_argument(flags::format("%s is too short for --block-size %lld: %lld tokens for training "
                                                  "and %lld for validation; each needs more than the block",
                                                  o.finetune.c_str(), static_cast<long long>(o.block_size),
                                                  static_cast<long long>(data.train.numel()),
                                                  static_cast<long long>(data.val.numel())));
    std::cout << flags::format("%s: %lld tokens for training (the first 90%% of the characters) and %lld for "
                               "validation\n",
                               o.finetune.c_str(), static_cast<long long>(data.train.numel()),
                               static_cast<long long>(data.val.numel()));
    // Weight decay on the matrices (weights, embeddings), not on biases and norms.
    std::vector<Tensor> decay, no_decay;
    for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    optim::AdamW opt({{decay, 0.1}, {no_decay, 0.0}}, {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95});
    manual_seed(o.seed);
    model.train();
    double best_val = INFINITY;
    for (int64_t iter = 0;; ++iter) {
        if (iter % o.eval_interval == 0 || iter == o.iters) {
            auto [train_loss, val_loss] = estimate_loss(model, data, o);
            std::cout << flags::format("step %lld: train loss %.4f, val loss %.4f", static_cast<long long>(iter),
                                       train_loss, val_loss);
            if (iter > 0 && val_loss < best_val) { // never replaced by a worse model, nor by the one read
                nn::fast::save_pretrained(model, o.out, layout);
                std::cout << "; saved to " << o.out;
            }
            std::cout << std::endl;
            best_val = std::min(best_val, val_loss);
        }
        if (iter == o.iters) break;
        const auto start = std::chrono::steady_clock::now();
        double loss_sum = 0;
        for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
            auto [x, y] = train::get_batch(data.train, o.batch_size, o.block_size);
            Tensor loss = model.forward(x, y).loss / static_cast<double>(o.grad_accum); // the mean over the step
            loss.backward();
            loss_sum += loss.item();
        }
        optim::clip_grad_norm_(model.parameters(), 1.0);
        opt.step();
        opt.zero_grad();
        std::cout << flags::format("iter %lld: loss %.4f, %.0f ms\n", static_cast<long long>(iter), loss_sum,
                                   seconds_since(start) * 1e3);
    }
}

int run(int argc, char** argv) {
    const Options o = parse(argc, argv);
    if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
    const AnyTokenizer tok = open_tokenizer(o.tokenizer);
    const auto start = std::chrono::steady_clock::now();
    nn::fast::Layout layout;
    std::error_code ec; // (a path the system cannot even look at is not a checkpoint: save_pretrained says why)
    if (!o.out.empty() && !o.overwrite &&
        (std::filesystem::exists(o.out + "/model.safetensors", ec) ||
         std::filesystem::exists(o.out + "/config.json", ec)))
        throw std::invalid_argument(o.out + " already holds a checkpoint; give another --out, or --overwrite to "
                                            "replace it");
    std::shared_ptr<nn::fast::GPT> model = nn::fast::from_pretrained(o.model, o.dropout, &layout);
    const auto& c = model->config;
    std::cout << flags::format("%s (%s layout): %.2f M parameters, %lld layers, %lld heads, n_embd %lld, "
                               "n_positions %lld, vocabulary %lld; loaded in %.1f s\n",
                               o.model.c_str(), nn::fast::layout_name(layout),
                               static_cast<double>(model->num_parameters()) / 1e6, static_cast<long long>(c.n_layer),
                               static_cast<long long>(c.n_head), static_cast<long long>(c.n_embd),
                               static_cast<long long>(c.block_size), static_cast<long long>(c.vocab_size),
                               seconds_since(start));
    if (tok.vocab_size > c.vocab_size)
        throw std::invalid_argument(flags::format("the tokenizer has %d tokens, more than the model's %lld",
                                                  tok.vocab_size, static_cast<long long>(c.vocab_size)));
    if (o.sample) {
        sample(*model, tok, o);
        return 0;
    }
    if (!o.eval.empty()) {
        evaluate(*model, tok, o);
        return 0;
    }
    Options f = o;
    if (f.block_size == 0) f.block_size = std::min<int64_t>(256, c.block_size);
    if (f.block_size > c.block_size)
        throw UsageError(flags::format("--block-size %lld is more than the model's n_positions (%lld)",
                                       static_cast<long long>(f.block_size), static_cast<long long>(c.block_size)));
    finetune(*model, layout, tok, f);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "gpt2: %s\nrun gpt2 --help for the options\n", e.what());
    } catch (const std::invalid_argument& e) { // a file it cannot read
        std::fprintf(stderr, "gpt2: %s\n", e.what());
    } catch (const ember::Error& e) { // a checkpoint or tokenizer it cannot read, a token outside the vocabulary
        std::fprintf(stderr, "gpt2: %s\n", e.what());
    } catch (const std::exception& e) { // anything else the system says (a file name too long, ...)
        std::fprintf(stderr, "gpt2: %s\n", e.what());
    }
    return 2;
}
