// ember_bench: how fast ember's kernels and training step run, one JSON
// object per line.
//
//   build/bench/ember_bench                      # everything
//   build/bench/ember_bench --only train_small   # one entry (or a prefix: --only mm_)
//   build/bench/ember_bench --threads 1 --repeat 3 --skip train_lecture
//   build/bench/ember_bench --only mm_ --tiles avx2,portable   # two matrix tiles, interleaved
//
// Entries (the same names in bench/openblas_bench.c and bench/torch_bench.py,
// so bench/compare.py can put the peers side by side):
//   mm_*      a float32 product C = A @ B: square ones, and the Linear shapes of
//             the training configs below (x @ W^T, W stored (out, in) as nn::Linear does)
//   bmm_*     the two batched products of attention, (T,hs)@(hs,T) and (T,T)@(T,hs),
//             over batch*heads slices
//   attn_*    attention forward (scores, causal mask, softmax, weights @ v) and
//             its backward, with autograd
//   sdpa_*    the same attention as one scaled_dot_product_attention
//   gelu_*    the exact GELU of nanoGPT's MLP at the macbook preset's size,
//             (12,64,512): forward alone (no_grad, as an evaluation runs it),
//             and forward and backward with autograd
//   sum_continued_macbook  a Linear's dW continued on one thread from sums
//             the other thread (or the same one) wrote last: the cost of
//             reading another core's cache (bench_sum_continued)
//   generate_* sampling from the fast GPT of the small or the lecture's size,
//             one sequence, with the key/value cache or without it (_nocache)
//   train_*   a whole training step of gpt.py's GPT (forward, cross-entropy,
//             backward, AdamW) on random tokens: tokens/s and the peak resident
//             memory of a process that runs only that step. The fast model
//             (nn/fast_gpt.h; fused attention from T = 32, or with --unfused
//             the unfused ops), except *_list, the lecture's classes (a list
//             of Heads, nn/gpt.h); train_lecture_checkpoint recomputes each
//             Block in the backward
//
// Times are medians over --repeat runs after one warm-up; "best" is the
// fastest run. A number alone says little on a shared machine: compare it
// with a peer measured in the same run (bench/compare.py does).
//
// --tiles A,B,... (mm_ entries; fast kernels only) runs each product with
// each of the named matrix tiles forced in turn (auto, avx2, avx512,
// portable: core/kernels/gemm.h's GemmTile), one call of each per round, so
// that a slow moment of a shared machine falls on all of them alike; each
// gets its own line, with a "tile" field. Compare their ratio, not the
// numbers.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ember.h>

#include "core/kernels/dispatch.h"
#include "core/kernels/gemm.h"
#include "core/ops/matmul.h"

using namespace ember;

namespace {

struct Options {
    std::string only;     // run entries whose name starts with this
    std::string skip;     // and not those whose name starts with this
    int threads = 0;      // 0: OpenMP's default
    int repeat = 0;       // 0: each entry's own default
    bool child = false;   // internal: this process runs one train entry for its peak memory
    bool unfused = false; // train and generate entries: the fast model without flash (GPTConfig::flash = false)
    std::vector<std::string> tiles; // --tiles: the matrix tiles to run each product with, interleaved
};

struct Timing {
    double median_s, best_s;
};

// One warm-up call, then `repeat` timed calls.
Timing time_it(int repeat, const std::function<void()>& fn) {
    fn();
    std::vector<double> runs;
    for (int i = 0; i < repeat; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        fn();
        runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(runs.begin(), runs.end());
    return {runs[runs.size() / 2], runs.front()};
}

double peak_rss_mb() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024.0; // Linux reports kilobytes
}

// ---- products -------------------------------------------------------------------------------

struct Product {
    std::string name;
    int64_t batch, m, k, n;
    bool b_transposed; // B is the transpose of a stored (n, k) matrix, as in x @ W^T
};

const std::vector<Product> kProducts = {
    {"mm_256", 1, 256, 256, 256, false},
    {"mm_512", 1, 512, 512, 512, false},
    {"mm_1024", 1, 1024, 1024, 1024, false},
    {"mm_2048", 1, 2048, 2048, 2048, false},
    // Linear layers: rows = batch*block tokens, k = in_features, n = out_features.
    {"mm_tiny_ffwd", 1, 256, 32, 128, true},       // tiny: 32*8 tokens, 32 -> 4*32
    {"mm_small_ffwd", 1, 512, 64, 256, true},      // small: 16*32 tokens, 64 -> 4*64
    {"mm_small_lm_head", 1, 512, 64, 65, true},    // small: 64 -> vocab 65
    {"mm_lecture_qkv", 1, 16384, 384, 1152, true}, // lecture: 64*256 tokens, 384 -> 3*384
    {"mm_lecture_ffwd1", 1, 16384, 384, 1536, true},
    {"mm_lecture_ffwd2", 1, 16384, 1536, 384, true},
    {"mm_lecture_lm_head", 1, 16384, 384, 65, true},
};

struct Attention {
    std::string name;
    int64_t batch, heads, T, hs;
};

// The attention sizes of the configs, and between them.
const std::vector<Attention> kAttention = {
    {"small", 16, 4, 32, 16},   {"t64", 16, 4, 64, 16},
    {"macbook", 12, 4, 64, 32}, // nanoGPT's macbook run (train_gpt --preset macbook)
    {"t128", 8, 4, 128, 32},    {"lecture", 64, 6, 256, 64},
};

void print_product(const std::string& name, const char* kind, int64_t batch, int64_t m, int64_t k, int64_t n,
                   double flops, Timing t, const std::string& tile = "") {
    const std::string tile_field = tile.empty() ? "" : ",\"tile\":\"" + tile + "\"";
    std::printf("{\"name\":\"%s\",\"kind\":\"%s\",\"batch\":%lld,\"m\":%lld,\"k\":%lld,\"n\":%lld,\"threads\":%d%s,"
                "\"ms\":%.4f,\"ms_best\":%.4f,\"gflops\":%.2f,\"gflops_best\":%.2f}\n",
                name.c_str(), kind, (long long)batch, (long long)m, (long long)k, (long long)n, get_num_threads(),
                tile_field.c_str(), t.median_s * 1e3, t.best_s * 1e3, flops / t.median_s * 1e-9,
                flops / t.best_s * 1e-9);
    std::fflush(stdout);
}

// The matrix tile of a --tiles name, and whether this CPU runs it when forced.
internal::GemmTile tile_named(const std::string& name) {
    if (name == "avx2") return internal::GemmTile::kAvx2;
    if (name == "avx512") return internal::GemmTile::kAvx512;
    if (name == "portable") return internal::GemmTile::kPortable;
    if (name == "auto") return internal::GemmTile::kAuto;
    std::fprintf(stderr, "ember_bench: --tiles takes auto, avx2, avx512 and portable, not '%s'\n", name.c_str());
    std::exit(2);
}

bool tile_runs_here(internal::GemmTile tile) {
    if constexpr (internal::kFastKernelsBuilt) {
        internal::GemmTileGuard forced(tile);
        switch (tile) {
        case internal::GemmTile::kAvx2: return internal::gemm_uses_avx2() && !internal::gemm_uses_avx512();
        case internal::GemmTile::kAvx512: return internal::gemm_uses_avx512();
        case internal::GemmTile::kPortable: return internal::gemm_uses_portable();
        default: return true;
        }
    }
    return false;
}

// A product with each of --tiles forced in turn: one warm-up call of each,
// then `repeat` rounds of one timed call of each, each round starting with
// the next tile (so that none always runs first, or always after another).
void bench_product_tiles(const Options& o, const Product& p, const Tensor& a, const Tensor& b, double flops,
                         int repeat) {
    if constexpr (internal::kFastKernelsBuilt) {
        std::vector<std::vector<double>> runs(o.tiles.size());
        for (int round = -1; round < repeat; ++round)
            for (size_t i = 0; i < o.tiles.size(); ++i) {
                const size_t t = (i + static_cast<size_t>(round + 1)) % o.tiles.size();
                internal::GemmTileGuard forced(tile_named(o.tiles[t]));
                const auto t0 = std::chrono::steady_clock::now();
                Tensor c = matmul(a, b);
                const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                if (round >= 0) runs[t].push_back(s);
            }
        for (size_t t = 0; t < o.tiles.size(); ++t) {
            std::sort(runs[t].begin(), runs[t].end());
            print_product(p.name, "matmul", 1, p.m, p.k, p.n, flops, {runs[t][runs[t].size() / 2], runs[t].front()},
                          o.tiles[t]);
        }
    }
}

void bench_product(const Options& o, const Product& p) {
    NoGradGuard no_grad;
    Tensor a = randn({p.m, p.k});
    Tensor b = p.b_transposed ? randn({p.n, p.k}).t() : randn({p.k, p.n});
    double flops = 2.0 * p.m * p.k * p.n;
    int repeat = o.repeat ? o.repeat : std::clamp(static_cast<int>(2e10 / flops), 5, 200);
    if (!o.tiles.empty()) {
        bench_product_tiles(o, p, a, b, flops, repeat);
        return;
    }
    Timing t = time_it(repeat, [&] { Tensor c = matmul(a, b); });
    print_product(p.name, "matmul", 1, p.m, p.k, p.n, flops, t);
}

void bench_batched(const Options& o, const Attention& a) {
    NoGradGuard no_grad;
    const int64_t bh = a.batch * a.heads;
    Tensor q = randn({bh, a.T, a.hs}), k = randn({bh, a.T, a.hs}), w = randn({bh, a.T, a.T});
    double flops = 2.0 * 2.0 * bh * a.T * a.T * a.hs; // scores and weights @ v
    int repeat = o.repeat ? o.repeat : std::clamp(static_cast<int>(2e10 / flops), 5, 200);
    Timing t = time_it(repeat, [&] {
        Tensor scores = matmul(q, k.transpose(-2, -1)); // (T,hs) @ (hs,T)
        Tensor out = matmul(w, k);                      // (T,T) @ (T,hs)
    });
    print_product("bmm_" + a.name, "bmm", bh, a.T, a.hs, a.T, flops, t);
}

// Causal attention of q, k, v (B,NH,T,hs) as the fast model computes it
// without flash (nn/fast_gpt.cpp): scale, mask and softmax in one op.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
    Tensor scores = matmul(q, k.transpose(-2, -1));
    Tensor weights = scaled_masked_softmax(scores, mask, 1.0 / std::sqrt(static_cast<double>(q.size(-1))));
    return matmul(weights, v);
}

// The same attention as one fused op (scaled_dot_product_attention): the
// (T,T) weights are never stored, and the causal mask skips the blocks above
// the diagonal.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&) {
    return scaled_dot_product_attention(q, k, v, {}, 0.0, true);
}

void bench_attention(const Options& o, const Attention& a, bool forward, bool backward, bool fused) {
    const auto attention = fused ? fused_attention : ::attention;
    const std::string prefix = fused ? "sdpa_" : "attn_";
    Tensor q = randn({a.batch, a.heads, a.T, a.hs}).requires_grad_();
    Tensor k = randn({a.batch, a.heads, a.T, a.hs}).requires_grad_();
    Tensor v = randn({a.batch, a.heads, a.T, a.hs}).requires_grad_();
    Tensor mask = triu(ones({a.T, a.T}), 1).to(kBool);
    Tensor grad = randn({a.batch, a.heads, a.T, a.hs});
    double flops = 2.0 * 2.0 * a.batch * a.heads * a.T * a.T * a.hs; // the forward's two products
    int repeat = o.repeat ? o.repeat : std::clamp(static_cast<int>(1e10 / flops), 5, 100);
    if (forward) {
        NoGradGuard no_grad;
        Timing t = time_it(repeat, [&] { attention(q, k, v, mask); });
        print_product(prefix + "fwd_" + a.name, "attention", a.batch * a.heads, a.T, a.hs, a.T, flops, t);
    }
    if (!backward) return;
    // Backward alone: each run builds the graph untimed, then times backward.
    std::vector<double> runs;
    for (int i = 0; i <= repeat; ++i) {
        q.zero_grad(), k.zero_grad(), v.zero_grad();
        Tensor out = attention(q, k, v, mask);
        auto t0 = std::chrono::steady_clock::now();
        out.backward(grad);
        if (i > 0) runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(runs.begin(), runs.end());
    print_product(prefix + "bwd_" + a.name, "attention_backward", a.batch * a.heads, a.T, a.hs, a.T, 2 * flops,
                  {runs[runs.size() / 2], runs.front()});
}

// ---- GELU -------------------------------------------------------------------------------------

// The exact GELU (nn::GELU, nanoGPT's MLP) on (12,64,512), the macbook
// preset's hidden layer: gelu_fwd_macbook under no_grad, gelu_bwd_macbook
// the forward (which then also computes the slope) and the backward.
// Billions of elements a second.
void bench_gelu(const Options& o, bool forward, bool backward) {
    Tensor x = (randn({12, 64, 512}) * 2).requires_grad_();
    Tensor dout = randn({12, 64, 512});
    const int64_t n = x.numel();
    const int repeat = o.repeat ? o.repeat : 200;
    auto print = [&](const char* name, Timing t) {
        std::printf("{\"name\":\"%s\",\"kind\":\"elementwise\",\"elements\":%lld,\"threads\":%d,\"ms\":%.4f,"
                    "\"ms_best\":%.4f,\"gelements\":%.3f,\"gelements_best\":%.3f}\n",
                    name, (long long)n, get_num_threads(), t.median_s * 1e3, t.best_s * 1e3, n / t.median_s * 1e-9,
                    n / t.best_s * 1e-9);
        std::fflush(stdout);
    };
    if (forward) {
        NoGradGuard no_grad;
        print("gelu_fwd_macbook", time_it(repeat, [&] { Tensor y = gelu(x); }));
    }
    if (backward)
        print("gelu_bwd_macbook", time_it(repeat, [&] {
                  x.zero_grad();
                  gelu(x).backward(dout);
              }));
}

// ---- a sum continued on the other core --------------------------------------------------------

// On two threads thread 1 continues each Linear's dW over its own tokens
// from thread 0's sums over the first half (Note [A Linear's gradients on
// two threads] in core/kernels/gemm.cpp): every tile of dW it adds to was
// last written by the other core. This times that continuation, dW += G^T
// @ x over 384 tokens on one thread (gemm, accumulating), at the
// macbook preset's four Linear shapes, with dW last written by the same
// thread ("local") or by the other ("remote"), one of each per round. The
// ratio of the two medians is the number to read: it grows when the host
// puts the two vCPUs far apart (build/bench/core_round_trip says which).
void bench_sum_continued(const Options& o) {
    if (get_num_threads() < 2) {
        std::fprintf(stderr, "ember_bench: sum_continued_macbook: needs two threads; skipped\n");
        return;
    }
    struct Shape {
        int64_t out, in;
    };
    const Shape shapes[] = {{384, 128}, {128, 128}, {512, 128}, {128, 512}}; // qkv, proj, fc, mlp proj
    const int64_t tokens = 384;
    const int repeat = o.repeat ? o.repeat : 400;
    const bool adaptive = adaptive_threads();
    set_adaptive_threads(false); // both threads every time
    double sums[2] = {0, 0};     // local, remote: the shapes' medians added up
    bool split = true;           // whether every round ran on two threads
    for (const Shape& s : shapes) {
        std::vector<float> g(tokens * s.out, 0.5f), x(tokens * s.in, 0.25f), dw(s.out * s.in, 1.0f);
        std::vector<double> times[2];
        for (int round = 0; round < 2 * repeat; ++round) {
            const int remote = round % 2;
            std::atomic<bool> written{false};
            parallel_for(0, 2, 1, [&](int64_t begin, int64_t end) {
                if (end - begin == 2) split = false;   // one thread took both: write first, never wait for itself
                if (begin <= remote && remote < end) { // the writer: new values in every line of dW
                    for (float& v : dw) v = v * 0.5f + 1.0f;
                    written.store(true, std::memory_order_release);
                }
                if (begin == 0) { // the thread that continues the sums
                    while (!written.load(std::memory_order_acquire)) {
                    }
                    const auto t0 = std::chrono::steady_clock::now();
                    // dW (out, in) += G^T (out, tokens) @ x (tokens, in), G^T read through G's strides
                    internal::gemm({g.data(), s.out, tokens, 1, s.out}, {x.data(), tokens, s.in, s.in, 1},
                                   {dw.data(), s.out, s.in, s.in, 1}, true);
                    times[remote].push_back(
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                }
            });
        }
        for (int k = 0; k < 2; ++k) {
            std::sort(times[k].begin(), times[k].end());
            sums[k] += times[k][times[k].size() / 2];
        }
    }
    set_adaptive_threads(adaptive);
    if (!split) {
        std::fprintf(stderr, "ember_bench: sum_continued_macbook: OpenMP ran a round on one thread; no result\n");
        return;
    }
    std::printf("{\"name\":\"sum_continued_macbook\",\"kind\":\"two_threads\",\"threads\":%d,\"local_us\":%.1f,"
                "\"remote_us\":%.1f,\"remote_over_local\":%.3f}\n",
                get_num_threads(), sums[0] * 1e6, sums[1] * 1e6, sums[1] / sums[0]);
    std::fflush(stdout);
}

// ---- training step --------------------------------------------------------------------------

struct TrainConfig {
    std::string name;
    int64_t batch, block, n_embd, n_head, n_layer;
    double dropout;
    bool lecture;                   // the lecture's classes (a list of Heads, the notebook's ops), or the fast model
    bool flash;                     // the fast model's attention through scaled_dot_product_attention
    int steps;                      // default timed steps
    bool checkpoint_blocks = false; // the fast model recomputes each Block's activations in the backward
    bool gpt2 =
        false; // GPT-2 124M (nn::fast::GPTConfig's defaults, block 1024), its 50,257 tokens; trained at T = block
};

// The tiny size runs the fast model without flash: at T = 8 the fused op's
// blocks cost more than the (T,T) weights they save (docs/performance.md).
const std::vector<TrainConfig> kTrain = {
    {"train_tiny", 32, 8, 32, 4, 3, 0.0, false, false, 200},
    {"train_tiny_list", 32, 8, 32, 4, 3, 0.0, true, false, 200},
    {"train_small", 16, 32, 64, 4, 4, 0.0, false, true, 100},
    {"train_lecture", 64, 256, 384, 6, 6, 0.2, false, true, 3},
    {"train_lecture_checkpoint", 64, 256, 384, 6, 6, 0.2, false, true, 3, true},
    {"train_lecture_list", 64, 256, 384, 6, 6, 0.2, true, false, 3},
    // llm.c's CPU quick start (B=4, T=64), and a longer context
    {"train_gpt2_124m_t64", 4, 64, 768, 12, 12, 0.0, false, true, 3, false, true},
    {"train_gpt2_124m_t256", 4, 256, 768, 12, 12, 0.0, false, true, 3, false, true},
};

// gpt.py's GPT at a config's size: the lecture's classes, or the fast model
// (with flash unless --unfused).
std::shared_ptr<nn::Module> make_gpt(const Options& o, int64_t block, int64_t n_embd, int64_t n_head, int64_t n_layer,
                                     double dropout, bool lecture, bool flash, bool checkpoint_blocks = false) {
    const nn::GPTConfig config{.vocab_size = 65,
                               .block_size = block,
                               .n_embd = n_embd,
                               .n_head = n_head,
                               .n_layer = n_layer,
                               .dropout = dropout};
    if (lecture) return std::make_shared<nn::GPTLanguageModel>(config);
    nn::fast::GPTConfig fast = nn::fast::GPTConfig::lecture(config);
    fast.flash = flash && !o.unfused;
    fast.checkpoint_blocks = checkpoint_blocks;
    return std::make_shared<nn::fast::GPT>(fast);
}

// GPT-2 124M, initialised as nanoGPT does (random weights: the speed does not depend on them).
std::shared_ptr<nn::fast::GPT> make_gpt2(const Options& o) {
    nn::fast::GPTConfig config; // GPT-2's smallest
    config.flash = !o.unfused;
    return std::make_shared<nn::fast::GPT>(config);
}

void bench_train(const Options& o, const TrainConfig& c) {
    manual_seed(1337);
    auto model = c.gpt2 ? make_gpt2(o)
                        : make_gpt(o, c.block, c.n_embd, c.n_head, c.n_layer, c.dropout, c.lecture, c.flash,
                                   c.checkpoint_blocks);
    optim::AdamW opt(model->parameters(), {.lr = 3e-4});
    const int64_t vocab = c.gpt2 ? 50257 : 65;
    Tensor x = randint(0, vocab, {c.batch, c.block}), y = randint(0, vocab, {c.batch, c.block});
    int steps = o.repeat ? o.repeat : c.steps;
    Timing t = time_it(steps, [&] {
        Tensor logits = model->forward(x); // (B,T,V)
        Tensor loss = cross_entropy(logits.view({-1, logits.size(-1)}), y.view({-1}));
        opt.zero_grad();
        loss.backward();
        opt.step();
    });
    double tokens = static_cast<double>(c.batch * c.block);
    std::printf("{\"name\":\"%s\",\"kind\":\"train\",\"batch\":%lld,\"block\":%lld,\"n_embd\":%lld,\"n_head\":%lld,"
                "\"n_layer\":%lld,\"dropout\":%g,\"model\":\"%s\",\"flash\":%s,\"threads\":%d,\"steps\":%d,"
                "\"ms_per_step\":%.3f,\"tokens_per_s\":%.0f,\"tokens_per_s_best\":%.0f,\"peak_rss_mb\":%.1f}\n",
                c.name.c_str(), (long long)c.batch, (long long)c.block, (long long)c.n_embd, (long long)c.n_head,
                (long long)c.n_layer, c.dropout, c.lecture ? "lecture" : "fast",
                !c.lecture && c.flash && !o.unfused ? "true" : "false", get_num_threads(), steps, t.median_s * 1e3,
                tokens / t.median_s, tokens / t.best_s, peak_rss_mb());
    std::fflush(stdout);
}

// ---- generation -----------------------------------------------------------------------------

// Sampling from a GPT of a training config's size (untrained: the speed does
// not depend on the weights), batch 1, from one token, as the lecture
// samples: tokens/s over max_new tokens, with GPT::generate's key/value
// cache or without it (each token runs the whole cropped context).
struct GenerateConfig {
    std::string name;
    int64_t block, n_embd, n_head, n_layer, max_new;
    bool cache;
    bool gpt2 = false; // GPT-2 124M and its vocabulary
};

// generate_lecture stops when the context fills the block (255 new tokens);
// generate_lecture_500 goes on past it, as the lecture's 500-token sample
// does, cropping the context to the last 256 tokens for each of the other 245.
const std::vector<GenerateConfig> kGenerate = {
    {"generate_small", 32, 64, 4, 4, 500, true},
    {"generate_small_nocache", 32, 64, 4, 4, 500, false},
    {"generate_lecture", 256, 384, 6, 6, 255, true},
    {"generate_lecture_nocache", 256, 384, 6, 6, 255, false},
    {"generate_lecture_500", 256, 384, 6, 6, 500, true},
    {"generate_lecture_500_nocache", 256, 384, 6, 6, 500, false},
    {"generate_gpt2_124m", 1024, 768, 12, 12, 64, true, true},
    {"generate_gpt2_124m_nocache", 1024, 768, 12, 12, 64, false, true},
};

void bench_generate(const Options& o, const GenerateConfig& c) {
    manual_seed(1337);
    auto model = c.gpt2 ? make_gpt2(o)
                        : std::static_pointer_cast<nn::fast::GPT>(make_gpt(o, c.block, c.n_embd, c.n_head, c.n_layer,
                                                                           0.2, /*lecture=*/false, /*flash=*/true));
    model->eval();
    Timing t = time_it(o.repeat ? o.repeat : 3, [&] {
        manual_seed(42);
        model->generate(zeros({1, 1}, kInt64), c.max_new, 1.0, std::nullopt, nullptr, c.cache);
    });
    std::printf("{\"name\":\"%s\",\"kind\":\"generate\",\"block\":%lld,\"n_embd\":%lld,\"n_head\":%lld,"
                "\"n_layer\":%lld,\"new_tokens\":%lld,\"cache\":%s,\"threads\":%d,\"seconds\":%.4f,"
                "\"tokens_per_s\":%.1f,\"tokens_per_s_best\":%.1f}\n",
                c.name.c_str(), (long long)c.block, (long long)c.n_embd, (long long)c.n_head, (long long)c.n_layer,
                (long long)c.max_new, c.cache ? "true" : "false", get_num_threads(), t.median_s, c.max_new / t.median_s,
                c.max_new / t.best_s);
    std::fflush(stdout);
}

// Peak memory is per process, so each train entry runs in a fresh process:
// this program again, with --only NAME --child.
void run_train_in_child(const Options& o, const std::string& self, const TrainConfig& c) {
    std::string cmd = "'" + self + "' --child --only " + c.name;
    if (o.threads) cmd += " --threads " + std::to_string(o.threads);
    if (o.repeat) cmd += " --repeat " + std::to_string(o.repeat);
    if (o.unfused) cmd += " --unfused";
    std::fflush(stdout);
    if (std::system(cmd.c_str()) != 0) {
        std::fprintf(stderr, "ember_bench: %s failed\n", c.name.c_str());
        std::exit(1);
    }
}

// --only NAME picks the entry of that name, or else every entry it is a prefix of.
bool exact_only = false;

bool selected(const Options& o, const std::string& name) {
    for (size_t begin = 0; begin < o.skip.size();) { // --skip A,B: prefixes A and B
        const size_t end = std::min(o.skip.find(',', begin), o.skip.size());
        if (end > begin && name.compare(0, end - begin, o.skip, begin, end - begin) == 0) return false;
        begin = end + 1;
    }
    if (o.only.empty()) return true;
    return exact_only ? name == o.only : name.compare(0, o.only.size(), o.only) == 0;
}

[[noreturn]] void usage(int status) {
    std::fprintf(status ? stderr : stdout,
                 "usage: ember_bench [--only NAME_OR_PREFIX] [--skip PREFIX] [--threads N] [--repeat N] [--unfused] "
                 "[--tiles TILE,TILE] [--list]\n"
                 "Prints one JSON object per line; see the top of bench/ember_bench.cpp.\n");
    std::exit(status);
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    bool list = false;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(2);
            return argv[++i];
        };
        auto number = [&]() {
            std::string v = value();
            char* end = nullptr;
            long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || n < 1 || n > 100000) {
                std::fprintf(stderr, "ember_bench: %s expects a positive integer, got '%s'\n", arg.c_str(), v.c_str());
                std::exit(2);
            }
            return static_cast<int>(n);
        };
        if (arg == "--only") o.only = value();
        else if (arg == "--skip") o.skip = value();
        else if (arg == "--threads") o.threads = number();
        else if (arg == "--repeat") o.repeat = number();
        else if (arg == "--child") o.child = true;
        else if (arg == "--unfused") o.unfused = true;
        else if (arg == "--tiles") {
            const std::string v = value();
            for (size_t begin = 0; begin <= v.size();) { // A,B,C
                const size_t end = std::min(v.find(',', begin), v.size());
                o.tiles.push_back(v.substr(begin, end - begin));
                begin = end + 1;
            }
        } else if (arg == "--list") list = true;
        else if (arg == "--help" || arg == "-h") usage(0);
        else {
            std::fprintf(stderr, "ember_bench: unknown argument '%s'\n", arg.c_str());
            usage(2);
        }
    }
    std::vector<std::string> names;
    for (const auto& p : kProducts) names.push_back(p.name);
    for (const auto& a : kAttention) names.push_back("bmm_" + a.name);
    for (const char* prefix : {"attn_", "sdpa_"})
        for (const auto& a : kAttention)
            names.push_back(prefix + ("fwd_" + a.name)), names.push_back(prefix + ("bwd_" + a.name));
    names.push_back("gelu_fwd_macbook"), names.push_back("gelu_bwd_macbook");
    names.push_back("sum_continued_macbook");
    for (const auto& c : kTrain) names.push_back(c.name);
    for (const auto& c : kGenerate) names.push_back(c.name);
    if (list) {
        for (const auto& n : names) std::printf("%s\n", n.c_str());
        return 0;
    }
    exact_only = std::find(names.begin(), names.end(), o.only) != names.end();
    if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return selected(o, n); })) {
        std::fprintf(stderr, "ember_bench: no entry matches --only %s --skip %s (see --list)\n", o.only.c_str(),
                     o.skip.c_str());
        return 2;
    }
    if (!o.tiles.empty() && !internal::kFastKernelsBuilt) {
        std::fprintf(stderr, "ember_bench: --tiles needs the fast kernels (this is a -Dkernels=reference build)\n");
        return 2;
    }
    for (const std::string& tile : o.tiles)
        if (!tile_runs_here(tile_named(tile))) {
            std::fprintf(stderr, "ember_bench: this CPU does not run the %s tile\n", tile.c_str());
            return 2;
        }
    if (o.threads) set_num_threads(o.threads);
    manual_seed(0);
    for (const auto& p : kProducts)
        if (selected(o, p.name)) bench_product(o, p);
    for (const auto& a : kAttention)
        if (selected(o, "bmm_" + a.name)) bench_batched(o, a);
    for (const char* prefix : {"attn_", "sdpa_"})
        for (const auto& a : kAttention) {
            const std::string fwd = prefix + ("fwd_" + a.name), bwd = prefix + ("bwd_" + a.name);
            if (selected(o, fwd) || selected(o, bwd))
                bench_attention(o, a, selected(o, fwd), selected(o, bwd), prefix[0] == 's');
        }
    if (selected(o, "gelu_fwd_macbook") || selected(o, "gelu_bwd_macbook"))
        bench_gelu(o, selected(o, "gelu_fwd_macbook"), selected(o, "gelu_bwd_macbook"));
    if (selected(o, "sum_continued_macbook")) bench_sum_continued(o);
    for (const auto& c : kGenerate)
        if (selected(o, c.name) && !o.child) bench_generate(o, c);
    for (const auto& c : kTrain) {
        if (!selected(o, c.name)) continue;
        if (o.child) bench_train(o, c);
        else run_train_in_child(o, std::filesystem::read_symlink("/proc/self/exe").string(), c);
    }
    return 0;
}
