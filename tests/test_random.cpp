// Random numbers bit-identical to PyTorch 1.13's CPU generator
// (core/random/: generator.cpp, distributions.cpp, normal.cpp,
// multinomial.cpp).
//
// Two kinds of references, both printed by torch 1.13: single values
// hard-coded here (docs/random.md, "How this was established", lists them),
// and tests/fixtures/random.txt, written by fx_random.py. Every comparison is
// exact to the bit. Error paths check the exception type and that the
// message names the op.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "check.h"

using namespace ember;
using ember::testing::Fixtures;
using ember::testing::require_equal;

namespace {

const Fixtures& random_fixtures() {
    static const Fixtures f("random");
    return f;
}

Tensor fx(const std::string& name) { return random_fixtures().tensor(name); }

// A fixture name from parts: key("randn.f32.seed", 0, ".n", 16) is "randn.f32.seed0.n16".
template <typename... Parts>
std::string key(const Parts&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    return out.str();
}

// Acceptance values printed by torch 1.13: manual_seed(1337); randn(1,3,2) and manual_seed(0); rand(3).
const std::vector<float> kRandn1337 = {-2.0259921550750732f, -2.0655088424682617f, -1.2053627967834473f,
                                       -0.9122241139411926f, -1.250221848487854f,  0.8032337427139282f};
const std::vector<float> kRand0 = {0.49625658988952637f, 0.7682217955589294f, 0.08847743272781372f};

// float64 normals from the 16-wide fill call the C library's log, sin and
// cos, as PyTorch does. glibc's (Linux, where the fixtures were made) give
// PyTorch's bits exactly; another C library rounds some results otherwise
// in the last bit, as PyTorch's own would there (under Wine, MinGW-w64's:
// 1 of the 1,000 values of one case, by 2 ulps). There they must agree to
// within a few ulps; everywhere else, bit for bit.
void require_float64_normals(const Tensor& actual, const Tensor& expected, const std::string& what) {
#ifdef _WIN32
    ember::testing::require_close(actual, expected, {1e-15, 1e-15}, what);
#else
    require_equal(actual, expected, what);
#endif
}

// Mirrors sample_index in tests/fixtures/fx_random.py: all of a small tensor;
// for a big one every 7th element (every 31st beyond 1000), then the last 32.
Tensor sample(const Tensor& t) {
    Tensor flat = t.contiguous().flatten();
    const int64_t n = flat.numel();
    if (n <= 100) return flat;
    const int64_t step = n <= 1000 ? 7 : 31;
    std::vector<int64_t> index;
    for (int64_t i = 0; i < n - 32; i += step) index.push_back(i);
    for (int64_t i = n - 32; i < n; ++i) index.push_back(i);
    return index_select(flat, 0, from_vector(index));
}

std::vector<float> values(const Tensor& t) {
    Tensor c = t.contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

std::vector<int64_t> ints(const Tensor& t) {
    Tensor c = t.contiguous();
    return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// A get_rng_state() blob stored in the fixtures as hex text.
std::vector<uint8_t> torch_state(const std::string& name) {
    const std::string& hex = random_fixtures().text(name);
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return bytes;
}

std::vector<int64_t> words(Generator& g, int n) {
    std::vector<int64_t> out;
    for (int i = 0; i < n; ++i) out.push_back(g.random());
    return out;
}

// nn.init.kaiming_uniform_(w, a=sqrt(5)) for fan_in inputs, computed as
// PyTorch's Python does: gain = sqrt(2 / (1 + a^2)) with a^2 rounding to
// 5.000000000000001, std = gain / sqrt(fan_in), bound = sqrt(3) * std.
double kaiming_bound(int64_t fan_in) {
    const double a = std::sqrt(5.0);
    const double gain = std::sqrt(2.0 / (1.0 + a * a));
    const double std = gain / std::sqrt(static_cast<double>(fan_in));
    return std::sqrt(3.0) * std;
}

// nn.Linear(in, out)'s reset_parameters: weight then bias, from one stream.
std::pair<Tensor, Tensor> linear_init(int64_t in, int64_t out, bool bias = true) {
    Tensor w = empty({out, in});
    const double bw = kaiming_bound(in);
    w.uniform_(-bw, bw);
    Tensor b;
    if (bias) {
        b = empty({out});
        const double bb = 1.0 / std::sqrt(static_cast<double>(in));
        b.uniform_(-bb, bb);
    }
    return {w, b};
}

template <typename E, typename F>
void require_error(F&& f, const std::string& op, const std::string& detail) {
    REQUIRE_THROWS_AS(f(), E);
    REQUIRE_THROWS_WITH(f(), Catch::Contains("[" + op + "]") && Catch::Contains(detail));
}

} // namespace

// ---- the engine ----------------------------------------------------------------------------

// Four threads each draw `ops` tensors of `size` numbers with make() from
// one shared generator, seeded 7; returns every number drawn, sorted.
template <typename Make>
std::vector<float> drawn_by_threads(int ops, int64_t size, Make make) {
    manual_seed(7);
    std::vector<std::vector<float>> per_thread(4);
    std::vector<std::thread> threads;
    for (auto& mine : per_thread)
        threads.emplace_back([&mine, ops, size, make] {
            for (int i = 0; i < ops; ++i) {
                Tensor t = make(size);
                const float* p = t.data_ptr<float>();
                mine.insert(mine.end(), p, p + size);
            }
        });
    for (auto& t : threads) t.join();
    std::vector<float> all;
    for (auto& mine : per_thread) all.insert(all.end(), mine.begin(), mine.end());
    std::sort(all.begin(), all.end());
    return all;
}

TEST_CASE("threads sharing the default generator draw the stream's numbers, none twice", "[random][threads]") {
    // Each op holds the generator's lock while it draws, so the ops' draws
    // are consecutive runs of one stream, in the order the threads got the
    // lock: together, the numbers one thread gets from 4 x 50 such ops in a
    // row. Without the lock, two threads twisting the engine at once crash
    // or draw words twice.
    const int ops = 50;
    const int64_t size = 1000;
    auto check = [&](auto make) {
        std::vector<float> together = drawn_by_threads(ops, size, make);
        manual_seed(7);
        std::vector<float> alone;
        for (int i = 0; i < 4 * ops; ++i) {
            Tensor t = make(size);
            alone.insert(alone.end(), t.data_ptr<float>(), t.data_ptr<float>() + size);
        }
        std::sort(alone.begin(), alone.end());
        REQUIRE(together.size() == alone.size());
        CHECK(together == alone);
    };
    check([](int64_t n) { return rand({n}); });
    check([](int64_t n) { return randn({n}); });
    check([](int64_t n) { return dropout(ones({n}), 0.5, true); });
}

namespace {

// Five AdamW steps of `model` with dropout on fixed batches drawn from
// `gen`; the losses. Nothing here draws from the default generator.
std::vector<float> train_steps(nn::Module& model, Generator& gen) {
    optim::AdamW optimizer(model.parameters(), {.lr = 1e-2});
    std::vector<float> losses;
    for (int step = 0; step < 5; ++step) {
        Tensor x = randint(0, 20, {2, 8}, {}, &gen), y = randint(0, 20, {2, 8}, {}, &gen);
        Tensor logits = model.forward(x);
        Tensor loss = cross_entropy(logits.view({-1, 20}), y.view({-1}));
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        losses.push_back(loss.item<float>());
    }
    return losses;
}

// A small GPT of each kind, with dropout 0.2 drawn from a generator of its own.
std::shared_ptr<nn::Module> small_gpt(bool fast, uint64_t seed) {
    manual_seed(seed); // the weights: drawn here, on one thread
    std::shared_ptr<nn::Module> model;
    if (fast)
        model = std::make_shared<nn::fast::GPT>(nn::fast::GPTConfig{
            .vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 2, .dropout = 0.2});
    else
        model = std::make_shared<nn::GPTLanguageModel>(
            nn::GPTConfig{.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 2, .dropout = 0.2});
    CHECK(nn::set_dropout_generator(*model, std::make_shared<Generator>(seed + 100)) > 0);
    return model;
}

} // namespace

TEST_CASE("GPTs whose dropout has a generator of its own train alike alone and side by side", "[random][threads]") {
    // Two GPTs with dropout trained in two std::threads crashed (the shared
    // generator, unlocked); with a generator each for batches and masks,
    // each thread's losses are the ones it gets alone, bit for bit.
    std::vector<std::vector<float>> alone, together(2);
    for (int i = 0; i < 2; ++i) {
        auto model = small_gpt(i == 0, 10 + i);
        Generator batches(20 + i);
        alone.push_back(train_steps(*model, batches));
    }
    std::vector<std::shared_ptr<nn::Module>> models = {small_gpt(true, 10), small_gpt(false, 11)};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
        threads.emplace_back([&, i] {
            Generator batches(20 + i);
            together[i] = train_steps(*models[i], batches);
        });
    for (auto& t : threads) t.join();
    CHECK(together[0] == alone[0]);
    CHECK(together[1] == alone[1]);
    CHECK(alone[0] != alone[1]);
    // The masks came from the models' own generators: set back to the
    // default one, the same steps give other losses.
    auto model = small_gpt(true, 10);
    CHECK(nn::set_dropout_generator(*model, nullptr) > 0);
    Generator batches(20);
    CHECK(train_steps(*model, batches) != alone[0]);
}

TEST_CASE("a copied Generator continues the same stream on its own", "[random]") {
    Generator a(3);
    a.random();
    Generator b = a;
    CHECK(b.random() == a.random());
    b.random();
    Generator c(9);
    c = b;
    CHECK(c.random() == b.random());
}

TEST_CASE("engine: first words for seeds 0 and 1337 are MT19937's", "[random]") {
    Generator g(0);
    REQUIRE(words(g, 4) == std::vector<int64_t>{2357136044u, 2546248239u, 3071714933u, 3626093760u});
    g.manual_seed(1337);
    REQUIRE(words(g, 4) == std::vector<int64_t>{0x43140c97u, 0x8f7ee0bdu, 0x289f835cu, 0x366c24e8u});
}

TEST_CASE("engine: 1300 words across two twists match torch, seeded from the low 32 bits", "[random]") {
    std::vector<int64_t> expected = ints(fx("engine.words.seed4294967301"));
    REQUIRE(expected.size() == 1300);
    for (uint64_t seed : {uint64_t{4294967301}, uint64_t{5}}) { // 2^32 + 5 and 5: same state
        Generator g(seed);
        REQUIRE(words(g, 1300) == expected);
    }
}

TEST_CASE("engine: random64 puts the first word in the high half", "[random]") {
    Generator g(0);
    REQUIRE(g.random64() == (uint64_t{2357136044u} << 32 | 2546248239u));
}

TEST_CASE("engine: initial_seed keeps all 64 bits, a negative seed wraps", "[random]") {
    Generator g(0);
    g.manual_seed(static_cast<uint64_t>(-1));
    REQUIRE(std::to_string(g.initial_seed()) == random_fixtures().text("initial_seed.minus1"));
    g.manual_seed(4294967301u);
    REQUIRE(g.initial_seed() == 4294967301u);
}

TEST_CASE("engine: an explicit Generator gives the default generator's stream", "[random]") {
    Generator g(1337);
    manual_seed(0);
    REQUIRE(values(randn({1, 3, 2}, {}, &g)) == kRandn1337);
    REQUIRE(values(rand({3})) == kRand0); // the default generator still starts seed 0's stream
}

// ---- get_state / set_state -------------------------------------------------------------------

TEST_CASE("get_state: the bytes of torch.get_rng_state()", "[random]") {
    manual_seed(1337);
    REQUIRE(default_generator().get_state() == torch_state("state.seed1337"));
    rand({5});
    randn({3}); // leaves a cached normal: bytes 5024 and 5040
    REQUIRE(default_generator().get_state() == torch_state("state.seed1337.after_rand5_randn3"));
    manual_seed(99);
    rand({700}); // past the first twist
    REQUIRE(default_generator().get_state() == torch_state("state.seed99.after_rand700"));
}

TEST_CASE("set_state: torch's bytes continue torch's stream, cached normal included", "[random]") {
    manual_seed(0);
    default_generator().set_state(torch_state("state.seed1337.after_rand5_randn3"));
    REQUIRE(default_generator().initial_seed() == 1337);
    require_equal(randn({4}), fx("state.seed1337.after_rand5_randn3.next_randn4"), "randn(4) after set_state");
}

TEST_CASE("set_state: a saved state replays the stream identically", "[random]") {
    manual_seed(99);
    rand({700});
    std::vector<uint8_t> saved = default_generator().get_state();
    require_equal(rand({3}), fx("state.seed99.after_rand700.next_rand3"), "first pass");
    default_generator().set_state(saved);
    require_equal(rand({3}), fx("state.seed99.after_rand700.next_rand3"), "after restoring");
    require_equal(randn({20}), fx("state.seed99.after_rand700.next_randn20"), "and further on");
}

TEST_CASE("set_state: rejects a wrong size or an impossible engine position", "[random]") {
    Generator g(0);
    require_error<ValueError>([&] { g.set_state(std::vector<uint8_t>(100)); }, "Generator::set_state", "100 bytes");
    std::vector<uint8_t> state = g.get_state();
    state[8] = 0; // left = 0
    require_error<ValueError>([&] { g.set_state(state); }, "Generator::set_state", "left=0");
    state = g.get_state();
    state[16] = 0x70; // next = 624 with left = 1 is fine; 0x270 + 1 = 625 ...
    state[17] = 0x02;
    state[8] = 2; // ... but left = 2 would read past the last word
    require_error<ValueError>([&] { g.set_state(state); }, "Generator::set_state", "next=624");
}

// ---- uniform ---------------------------------------------------------------------------------

TEST_CASE("rand: torch's values, manual_seed(0); rand(3)", "[random]") {
    manual_seed(0);
    REQUIRE(values(rand({3})) == kRand0);
}

TEST_CASE("rand: float32 is u24 for every seed and size", "[random]") {
    for (int seed : {0, 7})
        for (int64_t n : {1, 3, 17, 100, 4099}) {
            manual_seed(seed);
            require_equal(sample(rand({n})), fx(key("rand.f32.seed", seed, ".n", n)), key(seed, " ", n));
        }
}

TEST_CASE("rand: float64 is u53", "[random]") {
    for (int64_t n : {5, 100, 1000}) {
        manual_seed(3);
        require_equal(sample(rand({n}, kFloat64)), fx(key("rand.f64.seed3.n", n)), key("n=", n));
    }
}

TEST_CASE("uniform_: float32 is one fused multiply-add of u24", "[random]") {
    const double bounds[5][2] = {
        {-0.125, 0.125}, {-0.3, 0.7}, {-1 / std::sqrt(768.0), 1 / std::sqrt(768.0)}, {2.0, 5.0}, {-7.5, -7.25}};
    for (int i = 0; i < 5; ++i) {
        manual_seed(10 + i);
        Tensor t = empty({200});
        t.uniform_(bounds[i][0], bounds[i][1]);
        require_equal(t, fx(key("uniform.f32.case", i)), key("case ", i));
    }
}

TEST_CASE("uniform_: float64", "[random]") {
    manual_seed(20);
    Tensor t = empty({100}, kFloat64);
    t.uniform_(-1.5, 2.5);
    require_equal(t, fx("uniform.f64.-1.5_2.5"));
}

TEST_CASE("uniform_: a transposed view is filled in memory order", "[random]") {
    manual_seed(21);
    Tensor base = empty({6, 5});
    base.t().uniform_(-1, 1);
    require_equal(base, fx("uniform.f32.transposed.base"));
}

// ---- normal ----------------------------------------------------------------------------------

TEST_CASE("randn: acceptance, manual_seed(1337); randn(1,3,2)", "[random]") {
    manual_seed(1337);
    Tensor x = randn({1, 3, 2});
    REQUIRE(x.shape() == Shape{1, 3, 2});
    REQUIRE(values(x) == kRandn1337);
}

TEST_CASE("randn: torch's 16-wide values, randn(16)[:4] and randn(17)[-2:]", "[random]") {
    manual_seed(1337);
    std::vector<float> a = values(randn({16}));
    REQUIRE(std::vector<float>(a.begin(), a.begin() + 4) ==
            std::vector<float>{0.1807715892791748f, -0.06998809427022934f, -0.3596234917640686f, -0.9152044653892517f});
    manual_seed(1337);
    std::vector<float> b = values(randn({17}));
    REQUIRE(std::vector<float>(b.end() - 2, b.end()) == std::vector<float>{2.508586883544922f, 0.1661822348833084f});
}

TEST_CASE("randn: float32, scalar path below 16 elements, avx_mathfun fill and tail rule above", "[random]") {
    for (int seed : {0, 1, 1337})
        for (int64_t n : {1, 2, 3, 5, 15, 16, 17, 31, 32, 33, 47, 100, 1000, 4099}) {
            manual_seed(seed);
            require_equal(sample(randn({n})), fx(key("randn.f32.seed", seed, ".n", n)), key(seed, " ", n));
        }
}

TEST_CASE("randn: float64, scalar path and double fill", "[random]") {
    for (int seed : {0, 5})
        for (int64_t n : {1, 3, 15, 16, 17, 33, 100, 1000}) {
            manual_seed(seed);
            require_float64_normals(sample(randn({n}, kFloat64)), fx(key("randn.f64.seed", seed, ".n", n)),
                                    key(seed, " ", n));
        }
}

TEST_CASE("normal_: mean and std enter as a fused multiply-add, both dtypes and paths", "[random]") {
    const double params[3][2] = {{0.5, 2.0}, {-3.0, 1.7}, {0.0, 0.02}};
    for (int i = 0; i < 3; ++i)
        for (int64_t n : {5, 1000})
            for (DType dtype : {kFloat32, kFloat64}) {
                manual_seed(30 + i);
                Tensor t = empty({n}, dtype);
                t.normal_(params[i][0], params[i][1]);
                std::string name = key("normal.", dtype == kFloat32 ? "f32" : "f64", ".case", i, ".n", n);
                if (dtype == kFloat64) require_float64_normals(sample(t), fx(name), name);
                else require_equal(sample(t), fx(name), name);
            }
}

TEST_CASE("normal_: non-contiguous tensors take the scalar path in memory order", "[random]") {
    manual_seed(40);
    Tensor transposed = empty({8, 4});
    transposed.t().normal_();
    require_equal(transposed, fx("normal.transposed.base"), "transposed (4,8) view, 32 elements");
    manual_seed(41);
    Tensor permuted = empty({2, 3, 4});
    permuted.permute({2, 0, 1}).normal_();
    require_equal(permuted, fx("normal.permuted.base"), "permuted (4,2,3) view");
    manual_seed(42);
    Tensor strided = zeros({6, 8});
    strided.slice(1, None, None, 2).normal_();
    require_equal(strided, fx("normal.strided.base"), "every other column, 24 elements");
}

TEST_CASE("randn_like and rand_like: keep a transposed input's strides, fill in memory order", "[random]") {
    manual_seed(43);
    Tensor like = randn_like(empty({4, 8}).t());
    REQUIRE(like.strides() == Shape{1, 8});
    require_equal(like, fx("randn_like.transposed"), "randn_like");
    manual_seed(22);
    like = rand_like(empty({4, 8}).t());
    REQUIRE(like.strides() == Shape{1, 8});
    require_equal(like, fx("rand_like.transposed"), "rand_like");
}

TEST_CASE("randn: the scalar path caches its sine half across calls", "[random]") {
    manual_seed(7);
    require_equal(randn({3}), fx("cache.randn3"), "randn(3) leaves a cached sample");
    REQUIRE(default_generator().next_double_normal.has_value());
    require_equal(randn({20}), fx("cache.randn20"), "randn(20) (16-wide) neither uses nor clears it");
    require_equal(randn({1}), fx("cache.randn1"), "randn(1) returns it without drawing");
    REQUIRE_FALSE(default_generator().next_double_normal.has_value());
    require_equal(rand({2}), fx("cache.then_rand2"), "the stream after it");
}

TEST_CASE("randn: manual_seed clears the cached sample", "[random]") {
    manual_seed(7);
    randn({3});
    manual_seed(7);
    REQUIRE_FALSE(default_generator().next_double_normal.has_value());
    // A fresh pair again: the first value of randn(3) after the same seed.
    REQUIRE(values(randn({1}))[0] == values(fx("cache.randn3"))[0]);
}

TEST_CASE("randn: the 16-wide path uses n words, plus 16 when n % 16 != 0", "[random]") {
    for (int64_t n : {16, 17, 40, 48}) {
        manual_seed(3);
        randn({n});
        require_equal(rand({1}), fx(key("consumption.randn", n, ".next_rand")), key("n=", n));
    }
}

// ---- integers --------------------------------------------------------------------------------

TEST_CASE("randint: acceptance, manual_seed(3333); randint(0,10,(3,2)) and torch's values", "[random]") {
    manual_seed(3333);
    Tensor x = randint(0, 10, {3, 2});
    REQUIRE(x.dtype() == kInt64);
    REQUIRE(ints(x) == std::vector<int64_t>{2, 9, 7, 9, 4, 4});
    manual_seed(42);
    REQUIRE(ints(randint(0, 65, {5})) == std::vector<int64_t>{57, 47, 6, 4, 56});
}

TEST_CASE("randint: r32 mod range below 2^32, r64 mod range above", "[random]") {
    const int64_t p31 = int64_t{1} << 31, p32 = int64_t{1} << 32, p40 = int64_t{1} << 40, p41 = int64_t{1} << 41;
    struct Case {
        int64_t low, high;
        Shape shape;
    };
    const std::vector<Case> cases = {{0, 10, {3, 2}},     {0, 65, {1000}},   {-5, 5, {77}},  {0, p31, {100}},
                                     {0, p32 + 7, {100}}, {-p40, p40, {50}}, {0, p41, {50}}, {3, 4, {9}}};
    for (int seed : {0, 11})
        for (size_t i = 0; i < cases.size(); ++i) {
            manual_seed(seed);
            std::string name = key("randint.seed", seed, ".case", i);
            require_equal(randint(cases[i].low, cases[i].high, cases[i].shape), fx(name), name);
        }
}

TEST_CASE("randint: float and bool outputs", "[random]") {
    manual_seed(12);
    require_equal(randint(0, 10, {20}, kFloat32), fx("randint.f32.0_10"), "float32");
    manual_seed(12);
    require_equal(randint(0, (int64_t{1} << 32) + 7, {20}, kFloat32), fx("randint.f32.0_2p32p7"), "float32, r64");
    manual_seed(12);
    require_equal(randint(0, int64_t{1} << 60, {20}, kFloat32), fx("randint.f32.0_2p60"), "float32, high moved in");
    manual_seed(12);
    require_equal(randint((int64_t{1} << 25) + 1, (int64_t{1} << 25) + 40, {20}, kFloat32),
                  fx("randint.f32.2p25p1_2p25p40"), "float32, low moved in");
    manual_seed(12);
    require_equal(randint(-(int64_t{1} << 41), int64_t{1} << 41, {20}, kFloat64), fx("randint.f64.-2p41_2p41"),
                  "float64");
    manual_seed(12);
    require_equal(randint(0, 2, {20}, kBool), fx("randint.bool.0_2"), "bool");
    manual_seed(12);
    require_equal(randint(10, {20}, kFloat32), fx("randint.f32.0_10"), "randint(high, shape)");
}

// ---- Bernoulli and dropout -----------------------------------------------------------------------

TEST_CASE("bernoulli_: u53 < p, one 64-bit draw per element", "[random]") {
    const double ps[4] = {0.1, 0.5, 0.9, 1.0 / 3.0};
    for (int seed : {0, 9})
        for (int i = 0; i < 4; ++i) {
            manual_seed(seed);
            Tensor t = empty({300});
            t.bernoulli_(ps[i]);
            require_equal(t, fx(key("bernoulli_.seed", seed, ".p", i)).to(kFloat32), key(seed, " p=", ps[i]));
        }
}

TEST_CASE("bernoulli_: int64, bool and transposed targets", "[random]") {
    manual_seed(50);
    Tensor i64 = empty({40}, kInt64);
    i64.bernoulli_(0.3);
    require_equal(i64, fx("bernoulli_.int64"), "int64");
    manual_seed(50);
    Tensor b = empty({40}, kBool);
    b.bernoulli_(0.3);
    require_equal(b, fx("bernoulli_.bool"), "bool");
    manual_seed(50);
    Tensor base = empty({5, 6});
    base.t().bernoulli_(0.5);
    require_equal(base, fx("bernoulli_.transposed.base").to(kFloat32), "transposed view, memory order");
}

TEST_CASE("bernoulli_: a large fill draws its words in blocks, exactly two per element", "[random]") {
    manual_seed(53);
    Tensor big = empty({3000, 7});
    big.bernoulli_(0.2);
    require_equal(sample(big), fx("bernoulli_.large.sample").to(kFloat32), "sampled elements");
    REQUIRE(big.sum().to(kInt64).item<int64_t>() == fx("bernoulli_.large.ones").item<int64_t>());
    require_equal(rand({5}), fx("bernoulli_.large.next_rand5"), "the generator's state after the fill");
}

TEST_CASE("random_words gives the words, and leaves the state, of one random() per word", "[random]") {
    // Lengths that end before, at and past a twist, from positions that do the same.
    for (int64_t skip : {0, 1, 623, 624, 625}) {
        for (int64_t n : {1, 2, 623, 624, 625, 1300, 5000}) {
            Generator one(77), bulk(77);
            for (int64_t i = 0; i < skip; ++i) {
                one.random();
                bulk.random();
            }
            std::vector<uint32_t> words(static_cast<size_t>(n));
            bulk.random_words(words.data(), n);
            for (int64_t i = 0; i < n; ++i) REQUIRE(words[static_cast<size_t>(i)] == one.random());
            REQUIRE(bulk.get_state() == one.get_state());
            REQUIRE(bulk.random() == one.random());
        }
    }
}

TEST_CASE("bernoulli: a float32 p compares a u24, a float64 p a u53", "[random]") {
    manual_seed(52);
    require_equal(bernoulli(fx("bernoulli.p32")), fx("bernoulli.p32.out"), "float32 p");
    require_equal(bernoulli(fx("bernoulli.p64")), fx("bernoulli.p64.out"), "float64 p");
    Tensor pt = fx("bernoulli.pt").contiguous().t().contiguous().t(); // torch's (4,6) transposed view
    REQUIRE(pt.strides() == Shape{1, 4});
    require_equal(bernoulli(pt), fx("bernoulli.pt.out"), "transposed p: drawn in the output's row-major order");
}

TEST_CASE("dropout: training masks match F.dropout", "[random]") {
    for (double p : {0.1, 0.2, 0.5, 0.15}) {
        manual_seed(60);
        require_equal(dropout(ones({300}), p, true), fx(key("dropout.ones.p", p)), key("p=", p));
    }
    manual_seed(62);
    require_equal(dropout(fx("dropout.x"), 0.15, true), fx("dropout.x.p0.15"), "signed input, -0.0 where dropped");
    manual_seed(123);
    Tensor book = dropout(ones({6, 6}), 0.5, true);
    require_equal(book, fx("dropout.book"), "manual_seed(123); Dropout(0.5)(ones(6,6))");
    REQUIRE(values(book[0]) == std::vector<float>{2, 2, 0, 2, 2, 0});
    REQUIRE(values(book[1]) == std::vector<float>{0, 0, 0, 2, 0, 2});
}

// ---- exponential -------------------------------------------------------------------------------

TEST_CASE("exponential_: -(1/lambda) log(1 - u53) in double", "[random]") {
    for (double lambd : {1.0, 0.5, 3.0}) {
        manual_seed(70);
        Tensor t = empty({200});
        t.exponential_(lambd);
        require_equal(t,
                      fx(key("exponential.f32.lambda", lambd == 1.0   ? "1.0"
                                                       : lambd == 0.5 ? "0.5"
                                                                      : "3.0")),
                      key("lambda=", lambd));
    }
    manual_seed(71);
    Tensor t = empty({100}, kFloat64);
    t.exponential_(2.0);
    require_equal(t, fx("exponential.f64.lambda2"), "float64");
}

// ---- multinomial --------------------------------------------------------------------------------

TEST_CASE("multinomial: torch's values, Gumbel and CDF paths differ", "[random]") {
    Tensor p = softmax(arange(10, kFloat32) / 3.0, 0);
    manual_seed(1337);
    REQUIRE(ints(multinomial(p, 1)) == std::vector<int64_t>{7});
    manual_seed(1337);
    REQUIRE(ints(multinomial(p, 1, true)) == std::vector<int64_t>{8});
}

TEST_CASE("multinomial: 1-D rows, Gumbel (no replacement) and CDF (replacement)", "[random]") {
    for (int i = 0; i < 8; ++i) {
        std::string name = key("multinomial.1d.case", i);
        Tensor p = fx(name + ".p");
        manual_seed(100 + i);
        require_equal(multinomial(p, 1), fx(name + ".gumbel"), name + " gumbel");
        manual_seed(100 + i);
        require_equal(multinomial(p, 1, true), fx(name + ".cdf"), name + " cdf");
    }
}

TEST_CASE("multinomial: batched rows and several samples, both paths", "[random]") {
    Tensor p = fx("multinomial.2d.p");
    const struct {
        const char* name;
        int64_t k;
        bool replacement;
    } cases[] = {
        {"gumbel1", 1, false}, {"gumbel5", 5, false}, {"cdf1", 1, true}, {"cdf5", 5, true}, {"cdf80", 80, true}};
    for (const auto& c : cases) {
        manual_seed(110);
        Tensor got = multinomial(p, c.k, c.replacement);
        REQUIRE(got.shape() == Shape{4, c.k});
        require_equal(got, fx(std::string("multinomial.2d.") + c.name), c.name);
    }
}

TEST_CASE("multinomial: top-k branches and the order of tied zero weights", "[random]") {
    Tensor w = fx("multinomial.wide.p");
    manual_seed(111);
    require_equal(multinomial(w, 2), fx("multinomial.wide.k2"), "partial_sort branch (k*64 <= V)");
    manual_seed(111);
    require_equal(multinomial(w, 100), fx("multinomial.wide.k100"), "nth_element + sort branch");
    manual_seed(112);
    require_equal(multinomial(fx("multinomial.zeros.p"), 12), fx("multinomial.zeros.k12"), "all 12, half of them zero");
    manual_seed(113);
    require_equal(multinomial(fx("multinomial.zeros_partial.p"), 4), fx("multinomial.zeros_partial.k4"),
                  "3 non-zero weights of 300, 4 samples");
}

TEST_CASE("multinomial: float64 weights and a transposed input", "[random]") {
    Tensor d = fx("multinomial.f64.p");
    manual_seed(114);
    require_equal(multinomial(d, 2), fx("multinomial.f64.gumbel2"), "float64 gumbel");
    manual_seed(114);
    require_equal(multinomial(d, 7, true), fx("multinomial.f64.cdf7"), "float64 cdf");
    Tensor t = fx("multinomial.transposed.p").contiguous().t().contiguous().t(); // torch's (3,40) view of (40,3)
    REQUIRE(t.strides() == Shape{1, 3});
    manual_seed(115);
    require_equal(multinomial(t, 1), fx("multinomial.transposed.gumbel1"), "noise drawn in memory order");
    manual_seed(115);
    require_equal(multinomial(t, 3), fx("multinomial.transposed.gumbel3"), "top 3");
    manual_seed(115);
    require_equal(multinomial(t, 4, true), fx("multinomial.transposed.cdf4"), "cdf, rows in order");
}

// ---- module initialisation ---------------------------------------------------------------------

TEST_CASE("nn.Linear init: torch's manual_seed(42) Linear(2,3)", "[random]") {
    manual_seed(42);
    auto [w, b] = linear_init(2, 3);
    REQUIRE(values(w) == std::vector<float>{0.5406103730201721f, 0.5869042277336121f, -0.16565565764904022f,
                                            0.6495562791824341f, -0.15492962300777435f, 0.14268755912780762f});
    REQUIRE(values(b) == std::vector<float>{-0.34425848722457886f, 0.4152715504169464f, 0.6233449578285217f});
}

TEST_CASE("nn.Linear init: uniform_ with the kaiming bound, then the bias", "[random]") {
    const int64_t shapes[5][3] = {{42, 2, 3}, {0, 32, 16}, {1, 768, 8}, {2, 1, 1}, {3, 65, 65}};
    for (const auto& s : shapes) {
        manual_seed(static_cast<uint64_t>(s[0]));
        auto [w, b] = linear_init(s[1], s[2]);
        std::string name = key("linear.seed", s[0], ".", s[1], "x", s[2]);
        require_equal(sample(w), fx(name + ".weight"), name + " weight");
        require_equal(sample(b), fx(name + ".bias"), name + " bias");
    }
}

TEST_CASE("nn.Embedding init: randn, the padding row zeroed after drawing", "[random]") {
    manual_seed(0);
    require_equal(sample(randn({65, 32})), fx("embedding.seed0.65x32"), "65x32: 16-wide path");
    manual_seed(1);
    require_equal(randn({3, 5}).flatten(), fx("embedding.seed1.3x5"), "3x5 = 15: scalar path");
    manual_seed(2);
    Tensor w = randn({10, 4});
    w[2].zero_();
    require_equal(w.flatten(), fx("embedding.seed2.10x4"), "padding_idx=2");
}

TEST_CASE("composite: a model's construction and a training step share one stream", "[random]") {
    manual_seed(1337);
    Tensor emb = randn({65, 32});
    auto [w1, b1] = linear_init(32, 128);
    auto [w2, unused] = linear_init(128, 65, false);
    Tensor x = randn({4, 8, 32});
    Tensor y = dropout(x, 0.2, true);
    Tensor small = randn({5});
    Tensor logits = randn({3, 65});
    Tensor next = multinomial(fx("composite.probs"), 1); // torch's softmax(logits), exactly
    Tensor ix = randint(1000 - 8, {4});
    require_equal(sample(emb), fx("composite.emb"), "embedding");
    require_equal(sample(w1), fx("composite.l1.weight"), "l1.weight");
    require_equal(sample(b1), fx("composite.l1.bias"), "l1.bias");
    require_equal(sample(w2), fx("composite.l2.weight"), "l2.weight");
    require_equal(sample(x), fx("composite.x"), "x");
    require_equal(sample(y), fx("composite.dropout"), "dropout");
    require_equal(sample(small), fx("composite.small"), "randn(5)");
    require_equal(sample(logits), fx("composite.logits"), "logits");
    require_equal(next, fx("composite.next"), "multinomial");
    require_equal(ix, fx("composite.ix"), "randint");
}

// ---- in-place bookkeeping --------------------------------------------------------------------

TEST_CASE("fills bump the version and refuse a leaf that requires grad", "[random]") {
    Tensor t = zeros({4});
    uint64_t before = t.storage()->version();
    t.normal_();
    t.uniform_();
    t.bernoulli_(0.5);
    t.exponential_();
    REQUIRE(t.storage()->version() == before + 4);
    Tensor leaf = zeros({3}).requires_grad_();
    require_error<AutogradError>([&] { leaf.normal_(); }, "normal_", "leaf");
    require_error<AutogradError>([&] { leaf.uniform_(); }, "uniform_", "leaf");
    NoGradGuard guard; // as nn.init does it
    leaf.uniform_(-1, 1);
    REQUIRE(leaf.requires_grad());
}

// ---- errors ----------------------------------------------------------------------------------

TEST_CASE("errors: randint", "[random][errors]") {
    require_error<ValueError>([] { randint(5, 5, {3}); }, "randint", "low=5 >= high=5");
    require_error<ValueError>([] { randint(5, 3, {3}); }, "randint", "(3)");
    require_error<ValueError>([] { randint(0, 10, {3}, kBool); }, "randint", "bool");
    require_error<ValueError>([] { randint(-1, 2, {3}, kBool); }, "randint", "bool");
    // 2^25 + 1 is not a float32: low moves up to 2^25 + 4, past high.
    require_error<ValueError>([] { randint((int64_t{1} << 25) + 1, (int64_t{1} << 25) + 2, {3}, kFloat32); }, "randint",
                              "float32");
    require_error<ValueError>([] { randint(0, 10, {-1}); }, "randint", "");
    require_error<DTypeError>([] { randint(0, 10, {2}, TensorOptions().requires_grad(true)); }, "randint", "int64");
}

TEST_CASE("errors: multinomial", "[random][errors]") {
    require_error<ValueError>([] { multinomial(tensor({0.5f, -0.1f}), 1); }, "multinomial", ">= 0");
    require_error<ValueError>([] { multinomial(tensor({0.5f, -0.1f}), 1, true); }, "multinomial", "(2)");
    require_error<ValueError>([] { multinomial(tensor({0.5f, INFINITY}), 1); }, "multinomial", "inf");
    require_error<ValueError>([] { multinomial(tensor({0.5f, NAN}), 1, true); }, "multinomial", "nan");
    const Tensor zero_row = tensor({{1.f, 2.f}, {0.f, 0.f}}), two = tensor({0.5f, 0.5f});
    require_error<ValueError>([&] { multinomial(zero_row, 1); }, "multinomial",
                              "row 1 of probs of shape (2,2) sums to 0");
    require_error<ValueError>([] { multinomial(zeros({3}), 1, true); }, "multinomial", "sums to 0");
    require_error<ValueError>([&] { multinomial(two, 3); }, "multinomial",
                              "3 samples without replacement from 2 categories");
    require_error<ValueError>([] { multinomial(tensor({0.5f, 0.5f}), 0); }, "multinomial", "positive");
    require_error<ShapeError>([] { multinomial(ones({2, 2, 2}), 1); }, "multinomial", "(2,2,2)");
    require_error<ShapeError>([] { multinomial(scalar_tensor(1.0f), 1); }, "multinomial", "()");
    require_error<DTypeError>([] { multinomial(tensor({1, 2}), 1); }, "multinomial", "int64");
    require_error<ValueError>([] { multinomial(ones({2, 0}), 1); }, "multinomial", "0 categories");
    REQUIRE(multinomial(ones({0, 3}), 2).shape() == Shape{0, 2}); // no rows: nothing to check or draw
}

TEST_CASE("errors: bernoulli_ and bernoulli", "[random][errors]") {
    require_error<ValueError>([] { empty({3}).bernoulli_(1.5); }, "bernoulli_", "p=1.5");
    require_error<ValueError>([] { empty({3}).bernoulli_(-0.1); }, "bernoulli_", "(3)");
    require_error<ValueError>([] { empty({3}).bernoulli_(NAN); }, "bernoulli_", "nan");
    require_error<ValueError>([] { bernoulli(tensor({0.5f, 1.5f})); }, "bernoulli", "1.5");
    require_error<DTypeError>([] { bernoulli(tensor({1, 0})); }, "bernoulli", "int64");
    require_error<ValueError>([] { dropout(ones({3}), 1.5, true); }, "dropout", "1.5");
}

TEST_CASE("errors: normal_, randn and randn_like", "[random][errors]") {
    require_error<ValueError>([] { empty({3}).normal_(0, -1); }, "normal_", "std=-1");
    require_error<ValueError>([] { empty({3}).normal_(0, NAN); }, "normal_", "(3)");
    require_error<DTypeError>([] { empty({3}, kInt64).normal_(); }, "normal_", "int64");
    require_error<DTypeError>([] { empty({3}, kBool).normal_(); }, "normal_", "bool");
    require_error<DTypeError>([] { randn({3}, kInt64); }, "randn", "int64");
    require_error<DTypeError>([] { randn_like(zeros({3}, kInt64)); }, "randn_like", "int64");
}

TEST_CASE("errors: uniform_, rand and rand_like", "[random][errors]") {
    require_error<ValueError>([] { empty({3}).uniform_(2, 1); }, "uniform_", "from=2 > to=1");
    require_error<ValueError>([] { empty({3}).uniform_(0, 1e39); }, "uniform_", "float32");
    require_error<ValueError>([] { empty({3}).uniform_(-3e38, 3e38); }, "uniform_", "exceeds");
    require_error<ValueError>([] { empty({3}).uniform_(NAN, 1); }, "uniform_", "from=nan");
    require_error<DTypeError>([] { empty({3}, kInt64).uniform_(); }, "uniform_", "int64");
    require_error<DTypeError>([] { rand({3}, kInt64); }, "rand", "int64");
    require_error<DTypeError>([] { rand_like(zeros({3}, kBool)); }, "rand_like", "bool");
}

TEST_CASE("errors: exponential_", "[random][errors]") {
    require_error<ValueError>([] { empty({3}).exponential_(-1); }, "exponential_", "lambda=-1");
    require_error<ValueError>([] { empty({3}).exponential_(NAN); }, "exponential_", "(3)");
    require_error<DTypeError>([] { empty({3}, kInt64).exponential_(); }, "exponential_", "int64");
}

TEST_CASE("errors: filling an expanded tensor", "[random][errors]") {
    Tensor e = zeros({1}).expand({3});
    require_error<ValueError>([&] { e.normal_(); }, "normal_", "expanded");
    require_error<ValueError>([&] { e.uniform_(); }, "uniform_", "(3)");
    require_error<ValueError>([&] { e.bernoulli_(0.5); }, "bernoulli_", "expanded");
    require_error<ValueError>([&] { e.exponential_(); }, "exponential_", "expanded");
}
