// The fast kernels of core/kernels/ against the definitions they replace
// (the plain loops and compositions of core/ops/ and core/random/): the same
// bits, forward and backward, on shapes that reach every path of the fast
// copies (short rows through the shared buffer, long rows, partial blocks,
// masks with every broadcast pattern, rows split between threads); for
// FlashAttention, within a stated tolerance. Each case runs once with the
// fast kernels and once under ReferenceKernelsGuard. Built only with the
// fast kernels (tests/meson.build): a reference build has no other side.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include <catch2/catch.hpp>

#include "check.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/gemm.h"
#include "core/tensor/internal.h"

using namespace ember;
using namespace ember::testing;
using ember::internal::ReferenceKernelsGuard;

namespace {

// Runs `run` with the fast kernels and with the definitions, on 2
// threads, and requires every tensor it returns to agree bit for bit.
void require_same_bits(const std::string& what, const std::function<std::vector<Tensor>()>& run) {
    INFO(what);
    const int threads = get_num_threads();
    set_num_threads(std::max(2, threads));
    std::vector<Tensor> fast = run();
    std::vector<Tensor> reference;
    {
        ReferenceKernelsGuard guard;
        reference = run();
    }
    set_num_threads(threads);
    REQUIRE(fast.size() == reference.size());
    for (size_t i = 0; i < fast.size(); ++i)
        require_equal(fast[i], reference[i], what + ", result " + std::to_string(i));
}

// A leaf with x's values that requires grad.
Tensor leaf(const Tensor& x) { return x.detach().clone().requires_grad_(); }

} // namespace

TEST_CASE("softmax's fast rows give the bits of the plain loop", "[kernels][softmax]") {
    manual_seed(1);
    // Rows of 8 (several per buffer), 100 (one per buffer, a partial last
    // block), 300 (longer than the buffer), and many rows for two threads.
    for (Shape shape : {Shape{37, 8}, Shape{9, 100}, Shape{5, 300}, Shape{2000, 64}})
        for (DType dtype : {kFloat32, kFloat64}) {
            Tensor x = randn(shape, dtype) * 5;
            require_same_bits("softmax " + shape_str(shape), [&] { return std::vector<Tensor>{softmax(x, -1)}; });
        }
}

TEST_CASE("scaled_masked_softmax's fast rows give the bits of the plain loop", "[kernels][softmax]") {
    manual_seed(2);
    for (int64_t T : {8, 13, 64, 200}) {
        Tensor causal = tril(ones({T, T})) == 0;
        // No mask; the causal mask broadcast over (B,NH); a transposed one;
        // one per batch element broadcast over the heads; one per head,
        // broadcast over the rows. None masks a whole row (that gives NaN).
        Tensor per_batch = rand({3, 1, T, T}) + eye(T) * 2 < 0.3;
        Tensor per_head = rand({1, 4, 1, T}) + (arange(T) == 0).to(kFloat32) < 0.3;
        std::vector<Tensor> masks = {Tensor(), causal, causal.t(), per_batch, per_head};
        for (const Tensor& mask : masks)
            for (DType dtype : {kFloat32, kFloat64}) {
                Tensor x = randn({3, 4, T, T}, dtype) * 4, g = randn({3, 4, T, T}, dtype);
                const std::string what =
                    "T=" + std::to_string(T) + " mask " + (mask.defined() ? shape_str(mask.shape()) : "none");
                require_same_bits(what, [&] {
                    Tensor xl = leaf(x);
                    Tensor y = scaled_masked_softmax(xl, mask, 0.3);
                    y.backward(g);
                    return std::vector<Tensor>{y, xl.grad()};
                });
            }
    }
}

TEST_CASE("layer_norm's fast rows give the bits of the plain loop", "[kernels][layer_norm]") {
    manual_seed(3);
    // 15 rows (one partial block of 16), 100 rows of 48 (blocks, two
    // threads), long rows, rows of 5 and 13 (sums that are all or partly
    // row_sum's last n % 8 terms, and loops with a remainder in the AVX2
    // copy); with and without weight and bias. 2,560 rows of 64 and 1,001
    // of 40 (the first thread one row more) are enough rows for the
    // backward in two parts (Note [LayerNorm's backward on two threads]),
    // where there is a weight or a bias (on exactly two threads).
    TwoThreads two;
    for (Shape shape : {Shape{3, 5, 32}, Shape{100, 48}, Shape{7, 300}, Shape{64, 40, 64}, Shape{9, 5}, Shape{11, 13},
                        Shape{1001, 40}})
        for (DType dtype : {kFloat32, kFloat64})
            for (int affine = 0; affine < 3; ++affine) {
                const int64_t n = shape.back();
                Tensor x = randn(shape, dtype) * 3 + 1, g = randn(shape, dtype);
                Tensor w = affine > 0 ? randn({n}, dtype) : Tensor(), b = affine > 1 ? randn({n}, dtype) : Tensor();
                const int64_t runs = internal::fast::layer_norm_backward_two_part_runs();
                const bool two_parts = affine > 0 && x.numel() / n >= 1001;
                require_same_bits("layer_norm " + shape_str(shape) + " affine " + std::to_string(affine), [&] {
                    Tensor xl = leaf(x);
                    Tensor wl = w.defined() ? leaf(w) : Tensor(), bl = b.defined() ? leaf(b) : Tensor();
                    Tensor y = layer_norm(xl, {n}, wl, bl);
                    y.backward(g);
                    std::vector<Tensor> out = {y, xl.grad()};
                    if (wl.defined()) out.push_back(wl.grad());
                    if (bl.defined()) out.push_back(bl.grad());
                    return out;
                });
                REQUIRE(internal::fast::layer_norm_backward_two_part_runs() - runs == (two_parts ? 1 : 0));
            }
}

TEST_CASE("cross_entropy's fast rows give the bits of the plain loop", "[kernels][loss]") {
    manual_seed(4);
    // 300 rows of 65: six times the rows below which the kernel keeps them
    // on one thread (50), so the two threads take 150 each.
    for (DType dtype : {kFloat32, kFloat64}) {
        Tensor logits = randn({300, 65}, dtype) * 3;
        Tensor targets = randint(0, 65, {300});
        targets.index({Slice(0, 300, 7)}).fill_(-100); // some rows ignored
        require_same_bits("cross_entropy", [&] {
            Tensor x = leaf(logits);
            Tensor loss = cross_entropy(x, targets);
            loss.backward();
            return std::vector<Tensor>{loss, x.grad()};
        });
    }
}

TEST_CASE("sum over leading dims: the column kernel gives the bits of the plain reduction", "[kernels][reduce]") {
    manual_seed(5);
    for (DType dtype : {kFloat32, kFloat64}) {
        Tensor x = randn({16, 300, 48}, dtype);
        require_same_bits("sum", [&] { return std::vector<Tensor>{sum(x, {0, 1}), sum(x, 0), mean(x, {0, 1}, true)}; });
    }
}

TEST_CASE("the fast Bernoulli fill draws the words and bits of the plain one", "[kernels][random]") {
    // Blocks of 2048 elements and a partial last block; after the fill the
    // generator must stand at the same word.
    for (DType dtype : {kFloat32, kFloat64, kInt64, kBool})
        require_same_bits(std::string("bernoulli_ ") + dtype_name(dtype), [&] {
            Generator gen(42);
            Tensor t = empty({5000}, dtype);
            t.bernoulli_(0.3, &gen);
            Tensor masked = dropout(ones({3, 700}), 0.25, true, &gen);
            return std::vector<Tensor>{t, masked, scalar_tensor(static_cast<int64_t>(gen.random()))};
        });
}

TEST_CASE("the Mersenne Twister's fast twist and tempering give the plain loops' words", "[kernels][random]") {
    // Several twists (624 words each), draws of every size through
    // random_words and random(), and the state they leave.
    require_same_bits("mt19937", [] {
        Generator gen(2024);
        std::vector<uint32_t> words(3000);
        gen.random_words(words.data(), 1000);
        for (int i = 0; i < 7; ++i) words[1000 + i] = gen.random();
        gen.random_words(words.data() + 1007, 1993);
        std::vector<int64_t> as_int(words.begin(), words.end());
        std::vector<uint8_t> state = gen.get_state();
        return std::vector<Tensor>{from_vector(as_int, {3000}),
                                   from_vector(std::vector<int64_t>(state.begin(), state.end()),
                                               {static_cast<int64_t>(state.size())})};
    });
}

TEST_CASE("FlashAttention's dropout bits: drawn as its definition's dropout draws them", "[kernels][random]") {
    // 64 draws per word of bits, a partial last word; then the generator
    // must stand at the same word. The attention's output carries the bits.
    require_same_bits("scaled_dot_product_attention dropout", [] {
        Generator gen(3);
        Tensor q = randn({2, 3, 37, 8}, {}, &gen), k = randn({2, 3, 37, 8}, {}, &gen);
        Tensor out = scaled_dot_product_attention(q, k, eye(37).expand({2, 3, 37, 37}), {}, 0.3, false, {}, &gen);
        return std::vector<Tensor>{out == 0, scalar_tensor(static_cast<int64_t>(gen.random()))};
    });
}

TEST_CASE("dropout's fast path gives the bits of its definition, forward and backward", "[kernels][dropout]") {
    // The definition is x * (bernoulli(1 - p) / (1 - p)); the fast path keeps
    // the mask as bits and multiplies through a table. The same draws, the
    // same products, and the generator left at the same word. Sizes off the
    // table's 8 and the words' 64; a transposed input; p near 0 and near 1.
    manual_seed(8);
    for (DType dtype : {kFloat32, kFloat64})
        for (double p : {0.1, 0.5, 0.9})
            for (bool transposed : {false, true}) {
                Tensor x0 = randn({37, 29}, dtype) * 2, g = randn({37, 29}, dtype);
                if (transposed) x0 = randn({29, 37}, dtype).t();
                require_same_bits(
                    std::string("dropout ") + dtype_name(dtype) + " p=" + std::to_string(p) +
                        (transposed ? " transposed" : ""),
                    [&] {
                        Generator gen(123);
                        Tensor x = leaf(x0);
                        Tensor y = dropout(x, p, true, &gen);
                        y.backward(g);
                        return std::vector<Tensor>{y, x.grad(), scalar_tensor(static_cast<int64_t>(gen.random()))};
                    });
            }
}

namespace {

// |fast - definition| <= rtol * max(|definition|, a tenth of the largest
// |definition|) elementwise: relative, with a floor for entries near zero.
void require_relative(const Tensor& fast, const Tensor& definition, double rtol, const std::string& what) {
    const double scale = max(abs(definition)).to(kFloat64).item<double>();
    require_close(fast, definition, {rtol, rtol * 0.1 * scale}, what);
}

} // namespace

TEST_CASE("FlashAttention equals scaled_dot_product_attention's definition within rounding", "[kernels][sdpa]") {
    // The fast kernel's online softmax sums each row's exponentials in
    // another order than softmax does, block by block, so the two agree
    // within rounding: 1e-5 relative in float32, 1e-12 in float64, output
    // and every input's gradient. Rows of 40, 150 (three blocks of 64, the
    // last partial) and 70 queries against 130 keys; key and value shared
    // by the heads (broadcast); every kind of mask; dropout, which drops the
    // same weights in both.
    struct Case {
        std::string name;
        Shape q, kv;
        int mask; // 0 none, 1 causal, 2 bool allowed, 3 float added
        double p;
    };
    const std::vector<Case> cases = {
        {"causal, one block", {2, 3, 40, 16}, {2, 3, 40, 16}, 1, 0.0},
        {"causal, three blocks", {1, 2, 150, 32}, {1, 2, 150, 32}, 1, 0.0},
        {"rectangular, no mask", {1, 2, 70, 8}, {1, 2, 130, 8}, 0, 0.0},
        {"shared key and value heads", {2, 4, 70, 8}, {2, 1, 130, 8}, 0, 0.0},
        {"bool mask", {1, 2, 70, 8}, {1, 2, 130, 8}, 2, 0.0},
        {"float mask, dropout", {1, 2, 70, 8}, {1, 2, 130, 8}, 3, 0.1},
        {"causal, dropout", {1, 2, 150, 32}, {1, 2, 150, 32}, 1, 0.2},
    };
    for (const Case& c : cases)
        for (DType dtype : {kFloat32, kFloat64}) {
            manual_seed(11);
            Tensor q0 = randn(c.q, dtype), k0 = randn(c.kv, dtype), v0 = randn(c.kv, dtype);
            Tensor dout = randn(c.q, dtype);
            const int64_t L = c.q[2], S = c.kv[2];
            // The bool mask keeps the diagonal (no row is masked whole: that gives NaN).
            Tensor mask = c.mask == 2   ? (rand({L, S}) > 0.3) + (arange(L).unsqueeze(1) == arange(S).unsqueeze(0))
                          : c.mask == 3 ? randn({L, S}, dtype)
                                        : Tensor();
            std::vector<Tensor> results[2];
            for (int reference = 0; reference < 2; ++reference) {
                std::optional<ReferenceKernelsGuard> guard;
                if (reference) guard.emplace();
                Generator gen(5);
                Tensor q = leaf(q0), k = leaf(k0), v = leaf(v0);
                Tensor out = scaled_dot_product_attention(q, k, v, mask, c.p, c.mask == 1, std::nullopt, &gen);
                out.backward(dout);
                results[reference] = {out, q.grad(), k.grad(), v.grad()};
            }
            const double rtol = dtype == kFloat32 ? 1e-5 : 1e-12;
            const char* names[] = {"out", "dq", "dk", "dv"};
            for (int i = 0; i < 4; ++i)
                require_relative(results[0][i], results[1][i], rtol,
                                 c.name + " " + dtype_name(dtype) + ": " + names[i]);
            if (c.p > 0) require_equal(results[0][0] == 0, results[1][0] == 0, c.name + ": the dropped weights");
        }
}

TEST_CASE("FlashAttention's causal strips give the bits of the whole masked blocks", "[kernels][sdpa]") {
    // With is_causal the products over a block on the diagonal leave out,
    // 16 rows or keys at a time, what the mask hides, and the softmax steps
    // write a row's weights past its visible keys as 0 instead of e^(-inf);
    // the same mask given as a bool tensor runs whole blocks, the masked
    // keys' zero weights included. What the strips leave out adds exactly
    // 0, so the two agree bit for bit: output and every gradient, float32
    // and float64, on every tile. Rows of 64 (one block, four strips), 40
    // (a partial strip), 150 (three blocks, the last partial), 70 queries
    // against 130 keys and 130 against 70 (the mask's corner off the
    // blocks' diagonal), and dropout.
    // A product of 4 rows or fewer sums in another order (fast::gemm's
    // dot_rows, taken when B's rows are contiguous): blocks whose last strip
    // would be that short, with one value per key, one feature, one key, or
    // k and v stored transposed.
    struct Case {
        std::string name;
        Shape q, kv;
        double p;
        int64_t Ev = 0;          // the values' last dim, when not the keys'
        bool transposed = false; // k and v stored (..., E, S): their rows strided by 1
    };
    const std::vector<Case> cases = {
        {"one block", {2, 3, 64, 32}, {2, 3, 64, 32}, 0.0},
        {"a partial strip", {2, 3, 40, 16}, {2, 3, 40, 16}, 0.0},
        {"three blocks, dropout", {1, 2, 150, 32}, {1, 2, 150, 32}, 0.2},
        {"fewer queries than keys", {1, 2, 70, 8}, {1, 2, 130, 8}, 0.0},
        {"more queries than keys, dropout", {1, 2, 130, 8}, {1, 2, 70, 8}, 0.1},
        {"a last strip of 4, one value a key", {1, 2, 36, 8}, {1, 2, 36, 8}, 0.0, 1},
        {"one feature, one value", {1, 2, 52, 1}, {1, 2, 52, 1}, 0.0, 1},
        {"one value a key, dropout", {1, 2, 100, 8}, {1, 2, 100, 8}, 0.3, 1},
        {"k and v transposed", {1, 2, 100, 8}, {1, 2, 100, 8}, 0.0, 0, true},
        {"3 queries, one value a key", {1, 2, 3, 8}, {1, 2, 64, 8}, 0.0, 1},
        {"one key", {1, 2, 20, 8}, {1, 2, 1, 8}, 0.0},
    };
    using internal::GemmTile;
    for (GemmTile tile : {GemmTile::kAvx2, GemmTile::kAvx512, GemmTile::kPortable}) {
        internal::GemmTileGuard guard(tile);
        for (const Case& c : cases)
            for (DType dtype : {kFloat32, kFloat64}) {
                manual_seed(12);
                Shape v_shape = c.kv, out_shape = c.q;
                if (c.Ev) v_shape.back() = out_shape.back() = c.Ev;
                Tensor q0 = randn(c.q, dtype), k0 = randn(c.kv, dtype), v0 = randn(v_shape, dtype);
                Tensor dout = randn(out_shape, dtype);
                Tensor allowed = tril(ones({c.q[2], c.kv[2]})) != 0; // key j <= query i, PyTorch's is_causal
                std::vector<Tensor> results[2];
                for (int as_tensor = 0; as_tensor < 2; ++as_tensor) {
                    Generator gen(5);
                    // Transposed: the leaves hold (..., E, S), and k and v are their views.
                    Tensor q = leaf(q0), kl = leaf(c.transposed ? k0.transpose(-2, -1) : k0),
                           vl = leaf(c.transposed ? v0.transpose(-2, -1) : v0);
                    Tensor k = c.transposed ? kl.transpose(-2, -1) : kl, v = c.transposed ? vl.transpose(-2, -1) : vl;
                    if (c.transposed) REQUIRE((k.stride(-2) == 1 && v.stride(-2) == 1));
                    Tensor out = as_tensor ? scaled_dot_product_attention(q, k, v, allowed, c.p, false, {}, &gen)
                                           : scaled_dot_product_attention(q, k, v, {}, c.p, true, {}, &gen);
                    out.backward(dout);
                    results[as_tensor] = {out, q.grad(), kl.grad(), vl.grad()};
                }
                const char* names[] = {"out", "dq", "dk", "dv"};
                for (int i = 0; i < 4; ++i)
                    require_equal(results[0][i], results[1][i],
                                  c.name + " " + dtype_name(dtype) + " tile " + std::to_string(static_cast<int>(tile)) +
                                      ": " + names[i]);
            }
    }
}

TEST_CASE("A NaN in one query reaches FlashAttention's output and dv where PyTorch's composition sends it",
          "[kernels][sdpa]") {
    // q (1,2,40,16) with a NaN at (0,0,20,0), is_causal. PyTorch 1.13's
    // softmax(masked_fill(q k^T / 4, ~tril, -inf)) @ v, run on these shapes,
    // gives NaN in slice 0 only: in row 20 of out and nowhere else there,
    // and in every element of dv (row 20's weights are all NaN, masked keys
    // included, and dv = P^T dout). 40 rows make a last strip of 24, whose
    // products read a row's weights past its last key: those must stay NaN,
    // not 0. dq and dk are not pinned in slice 0: the fused op takes a row
    // whose scores are all NaN as a row that sees no key, whose score
    // gradient is 0, so dq's row 20 is 0 where PyTorch's is NaN, and dk is
    // NaN only where q's NaN multiplies it (column 0), where PyTorch has
    // 355 of the 640 NaN.
    for (DType dtype : {kFloat32, kFloat64})
        dispatch_floating(dtype, "test", [&]<typename T>(TypeTag<T>) {
            manual_seed(3);
            Tensor q0 = randn({1, 2, 40, 16}, dtype), k0 = randn({1, 2, 40, 16}, dtype),
                   v0 = randn({1, 2, 40, 16}, dtype);
            q0.data_ptr<T>()[20 * 16] = std::numeric_limits<T>::quiet_NaN();
            Tensor q = leaf(q0), k = leaf(k0), v = leaf(v0);
            Tensor out = scaled_dot_product_attention(q, k, v, {}, 0.0, true);
            out.backward(randn(out.shape(), dtype));
            const std::pair<std::string, Tensor> results[] = {{"out", out},
                                                              {"dq", q.grad()},
                                                              {"dk", k.grad()},
                                                              {"dv", v.grad()}};
            for (const auto& [name, t] : results) {
                const Tensor c = t.contiguous();
                for (int64_t slice = 0; slice < 2; ++slice)
                    for (int64_t row = 0; row < 40; ++row)
                        for (int64_t col = 0; col < 16; ++col) {
                            if (slice == 0 && (name == "dq" || name == "dk")) continue;
                            const bool nan = slice == 0 && (name == "dv" || row == 20);
                            INFO(name << " " << dtype_name(dtype) << " at slice " << slice << ", row " << row
                                      << ", column " << col);
                            REQUIRE(std::isnan(c.data_ptr<T>()[(slice * 40 + row) * 16 + col]) == nan);
                        }
            }
        });
}

TEST_CASE("FlashAttention on heads cut from one projection: laid out as them, same values", "[kernels][sdpa]") {
    // q, k and v as nanoGPT's attention makes them: one (B,T,3C) projection
    // split in three and viewed as heads, (NH,B,T,hs), strided. The kernel
    // reads them in place and lays out its output and their gradients as
    // they are, (B,T,NH,hs) in memory, so that the merge of the heads back
    // into (B,T,C) is a view (the definition's result is contiguous, and the
    // merge a copy). Values and the projection's gradient agree within
    // rounding (1e-5 relative); the gradient flowing into the kernel is the
    // merge's, strided too.
    const int64_t B = 2, T = 70, NH = 3, hs = 16, C = NH * hs;
    manual_seed(12);
    Tensor qkv0 = randn({B, T, 3 * C}), w = randn({B, T, C});
    std::vector<Tensor> results[2];
    for (int reference = 0; reference < 2; ++reference) {
        std::optional<ReferenceKernelsGuard> guard;
        if (reference) guard.emplace();
        Generator gen(5);
        Tensor qkv = leaf(qkv0);
        std::vector<Tensor> pieces = qkv.split(C, 2);
        auto heads = [&](const Tensor& t) { return t.view({B, T, NH, hs}).permute({2, 0, 1, 3}); };
        Tensor out = scaled_dot_product_attention(heads(pieces[0]), heads(pieces[1]), heads(pieces[2]), Tensor(), 0.2,
                                                  /*is_causal=*/true, std::nullopt, &gen);
        Tensor merged_heads = out.permute({1, 2, 0, 3});
        CHECK(merged_heads.is_contiguous() == !reference);
        (merged_heads.reshape({B, T, C}) * w).sum().backward();
        results[reference] = {out, qkv.grad()};
    }
    require_relative(results[0][0], results[1][0], 1e-5, "out");
    require_relative(results[0][1], results[1][1], 1e-5, "the projection's gradient");
}

// An identity op that keeps the gradient it is handed, to see what reaches it.
struct KeepGradient : Function<KeepGradient> {
    static inline Tensor seen;
    static Tensor forward(AutogradContext*, const Tensor& x) { return x.clone(); }
    static std::vector<Tensor> backward(AutogradContext*, const Tensor& dout) {
        seen = dout;
        return {dout};
    }
};

TEST_CASE("FlashAttention's gradients of a split projection reach it in one buffer, not copied", "[kernels][sdpa]") {
    // The fast model's attention: q, k and v cut from one (B,T,3C) tensor.
    // FlashAttention gives dq, dk and dv in one buffer, as q, k and v lie in
    // the projection, and split's backward takes that buffer as the
    // projection's gradient (a view) instead of copying the three into a
    // fresh one (the definition: a fresh contiguous tensor, no view). The
    // same bits as q, k and v cut apart (three leaves, so three buffers and
    // a cat) on the fast path, and the definition's values within rounding.
    const int64_t B = 2, T = 40, NH = 2, hs = 16, C = NH * hs;
    manual_seed(21);
    Tensor qkv0 = randn({B, T, 3 * C}), w = randn({B, T, C});
    auto heads = [&](const Tensor& t) { return t.view({B, T, NH, hs}).permute({2, 0, 1, 3}); };
    auto loss = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
        Tensor out = scaled_dot_product_attention(heads(q), heads(k), heads(v), Tensor(), 0.0, /*is_causal=*/true);
        return (out.permute({1, 2, 0, 3}).reshape({B, T, C}) * w).sum();
    };
    Tensor grads[2];
    for (int reference = 0; reference < 2; ++reference) {
        std::optional<ReferenceKernelsGuard> guard;
        if (reference) guard.emplace();
        Tensor qkv = leaf(qkv0);
        std::vector<Tensor> pieces = KeepGradient::apply(qkv).split(C, 2);
        loss(pieces[0], pieces[1], pieces[2]).backward();
        const Tensor& dqkv = KeepGradient::seen;
        REQUIRE(dqkv.shape() == Shape{B, T, 3 * C});
        CHECK(dqkv.is_contiguous());
        CHECK((dqkv.impl()->view_base != nullptr) == !reference);
        CHECK(dqkv.storage()->nbytes() == static_cast<size_t>(B * T * 3 * C) * sizeof(float));
        grads[reference] = qkv.grad();
    }
    require_relative(grads[0], grads[1], 1e-5, "the projection's gradient");
    // q, k and v as three leaves: three buffers, and the split's copy.
    std::vector<Tensor> apart;
    for (const Tensor& piece : qkv0.split(C, 2)) apart.push_back(leaf(piece.contiguous()));
    loss(apart[0], apart[1], apart[2]).backward();
    require_equal(grads[0], cat({apart[0].grad(), apart[1].grad(), apart[2].grad()}, 2),
                  "the projection's gradient, against q, k and v apart");
}

TEST_CASE("FlashAttention's gradients of pieces with the last dim strided: the bits of pieces apart",
          "[kernels][sdpa]") {
    // q, k and v cut from one tensor but each (L,E) transposed, E not
    // innermost: their gradients stay in buffers of their own, laid out
    // with E innermost, as for q, k and v apart. (In one buffer as q lies,
    // dq's columns would be strided, and products of 4 rows or fewer sum in
    // another order there: different last bits at T = 4.)
    for (int64_t T : {4, 20, 68}) {
        INFO("T = " << T);
        manual_seed(3);
        Tensor x0 = randn({2, 2, 3, 8, T}), w = randn({2, 2, T, 8});
        auto loss = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
            auto heads = [](const Tensor& t) { return t.transpose(-1, -2); }; // (2,2,8,T) -> (2,2,T,8)
            return (scaled_dot_product_attention(heads(q), heads(k), heads(v), Tensor(), 0.0, true) * w).sum();
        };
        Tensor x = leaf(x0);
        std::vector<Tensor> pieces = x.split(1, 2);
        loss(pieces[0].squeeze(2), pieces[1].squeeze(2), pieces[2].squeeze(2)).backward();
        std::vector<Tensor> apart;
        for (int64_t i = 0; i < 3; ++i) apart.push_back(leaf(x0.select(2, i)));
        loss(apart[0], apart[1], apart[2]).backward();
        for (int64_t i = 0; i < 3; ++i)
            require_equal(x.grad().select(2, i), apart[i].grad(), "piece " + std::to_string(i));
    }
}

TEST_CASE("split's backward takes the pieces' gradients whole only where they lie as the pieces", "[kernels]") {
    using internal::fast::split_gradient_whole;
    Tensor x = arange(24).to(kFloat32).view({2, 12});
    const Shape sizes{4, 4, 4}, shape{2, 12};
    std::vector<Tensor> pieces = x.split(4, 1);
    Tensor whole = split_gradient_whole(pieces, sizes, 1, shape, kFloat32);
    REQUIRE(whole.defined());
    CHECK(whole.data_ptr<float>() == x.data_ptr<float>());
    CHECK(whole.strides() == x.strides());
    require_equal(whole, x);
    // Each of these is copied by the definition instead.
    CHECK_FALSE(split_gradient_whole({pieces[1], pieces[0], pieces[2]}, sizes, 1, shape, kFloat32).defined());
    CHECK_FALSE(split_gradient_whole({pieces[0], Tensor(), pieces[2]}, sizes, 1, shape, kFloat32).defined());
    CHECK_FALSE(split_gradient_whole({pieces[0], pieces[1].clone(), pieces[2]}, sizes, 1, shape, kFloat32).defined());
    CHECK_FALSE(split_gradient_whole(pieces, sizes, 1, shape, kFloat64).defined());
    CHECK_FALSE(split_gradient_whole(pieces, {4, 8}, 1, shape, kFloat32).defined());  // 3 gradients, 2 pieces
    CHECK_FALSE(split_gradient_whole(pieces, sizes, 1, {3, 12}, kFloat32).defined()); // x has 3 rows, they 2
    // Side by side, but the whole would have two indices on one element:
    // rows 2 apart, each 12 long.
    Tensor storage = zeros({26});
    std::vector<Tensor> overlapping;
    for (int64_t i = 0; i < 3; ++i) overlapping.push_back(internal::make_view(storage, {2, 4}, {2, 1}, 4 * i));
    CHECK_FALSE(split_gradient_whole(overlapping, sizes, 1, shape, kFloat32).defined());
    // Side by side, but the whole would not be a gap-free block (its rows 13
    // apart): only gap-free wholes are taken.
    Tensor wide = zeros({2, 13});
    CHECK_FALSE(split_gradient_whole(wide.narrow(1, 0, 12).split(4, 1), sizes, 1, shape, kFloat32).defined());
}

TEST_CASE("AdamW's fast update gives the bits of the plain loop", "[kernels][optim]") {
    manual_seed(6);
    // Five parameters, 133,012 elements end to end: the kernel's two
    // threads split them in the middle of the third, and the two groups'
    // weight decays differ, so each element must take its own parameter's
    // scalars.
    const std::vector<Shape> shapes = {{300, 200}, {7}, {200, 200}, {5}, {33000}};
    for (DType dtype : {kFloat32, kFloat64}) {
        std::vector<Tensor> start, grads;
        for (const Shape& shape : shapes) start.push_back(randn(shape, dtype));
        for (int s = 0; s < 3; ++s)
            for (const Shape& shape : shapes) grads.push_back(randn(shape, dtype));
        require_same_bits(std::string("AdamW ") + dtype_name(dtype), [&] {
            std::vector<Tensor> p;
            for (const Tensor& t : start) p.push_back(leaf(t));
            optim::AdamW opt({{.params = {p[0], p[2], p[4]}, .weight_decay = 0.1},
                              {.params = {p[1], p[3]}, .weight_decay = 0.0}},
                             {.lr = 0.01, .weight_decay = 0.0});
            for (int s = 0; s < 3; ++s) {
                for (size_t i = 0; i < p.size(); ++i) p[i].set_grad(grads[s * p.size() + i]);
                opt.step();
            }
            std::vector<Tensor> out;
            for (const Tensor& t : p) out.push_back(t.detach());
            for (const auto& [name, t] : opt.state_dict()) out.push_back(t);
            return out;
        });
    }
}

TEST_CASE("AdamW updates all parameters in one loop only when none overlaps another", "[kernels][optim]") {
    // A parameter listed twice, or one whose gradient is another's data:
    // one parallel loop over both would race (the second update must read
    // what the first wrote), so they run one after another, with the
    // definition's bits.
    manual_seed(7);
    Tensor w0 = randn({100000}), b0 = randn({100000}), g = randn({100000});
    const auto runs_of = [&](const std::function<void()>& step) {
        const int64_t before = internal::fast::adamw_update_all_runs();
        step();
        return internal::fast::adamw_update_all_runs() - before;
    };
    require_same_bits("AdamW, apart", [&] {
        Tensor w = leaf(w0), b = leaf(b0);
        optim::AdamW opt({w, b}, {.lr = 0.01});
        w.set_grad(g), b.set_grad(g);
        REQUIRE(runs_of([&] { opt.step(); }) == (internal::use_fast_kernels() ? 1 : 0));
        return std::vector<Tensor>{w.detach(), b.detach()};
    });
    require_same_bits("AdamW, a parameter twice", [&] {
        Tensor w = leaf(w0);
        optim::AdamW opt({w, w}, {.lr = 0.01});
        w.set_grad(g);
        REQUIRE(runs_of([&] { opt.step(); }) == 0);
        return std::vector<Tensor>{w.detach()};
    });
    require_same_bits("AdamW, one's gradient the other's data", [&] {
        Tensor w = leaf(w0), b = leaf(b0);
        optim::AdamW opt({w, b}, {.lr = 0.01});
        w.set_grad(g), b.set_grad(w.detach());
        REQUIRE(runs_of([&] { opt.step(); }) == 0);
        return std::vector<Tensor>{w.detach(), b.detach()};
    });
}

TEST_CASE("clip_grad_norm_'s fast sums of squares give the bits of its definition", "[kernels][optim]") {
    // Contiguous gradients of 1, 9, 5 and 11 of sum()'s 16,384-element
    // chunks (the float32 ones' 15 whole chunks make a group of eight, from
    // three gradients, and seven alone; the float64 one's nine a group and
    // one alone; partial last chunks), a small one, a transposed one the
    // kernel leaves to the definition, a missing one; float32 and float64.
    manual_seed(12);
    std::vector<Tensor> grads = {randn({7}),
                                 randn({16384}) * 1e-3,
                                 randn({9, 16384}, kFloat64),
                                 randn({5 * 16384 - 3}) * 40,
                                 randn({10 * 16384 + 77}),
                                 randn({700, 300}).t(),
                                 Tensor()};
    require_same_bits("clip_grad_norm_", [&] {
        std::vector<Tensor> params, norms;
        for (const Tensor& g : grads) {
            params.push_back(g.defined() ? zeros(g.sizes(), g.dtype()) : zeros({3}));
            params.back().requires_grad_();
            if (g.defined()) params.back().set_grad(g);
        }
        // One parameter at a time gives each gradient's own norm; then all together.
        for (const Tensor& p : params)
            if (p.grad().defined()) norms.push_back(scalar_tensor(optim::clip_grad_norm_({p}, 1e30), kFloat64));
        norms.push_back(scalar_tensor(optim::clip_grad_norm_(params, 1e30), kFloat64));
        return norms;
    });
}

TEST_CASE("float64 batched products: the slice split gives the bits of one slice at a time", "[kernels][matmul]") {
    manual_seed(7);
    // float64 runs the portable blocked gemm, with gemm_plain's bits: only
    // the sharing of slices between threads differs. Many small slices, and
    // a few large ones.
    for (auto [a_shape, b_shape] :
         {std::pair{Shape{64, 8, 16}, Shape{64, 16, 8}}, std::pair{Shape{24, 96, 64}, Shape{64, 96}},
          std::pair{Shape{2, 200, 150}, Shape{2, 150, 90}}}) {
        Tensor a = randn(a_shape, kFloat64), b = randn(b_shape, kFloat64);
        require_same_bits("matmul " + shape_str(a_shape) + " @ " + shape_str(b_shape),
                          [&] { return std::vector<Tensor>{matmul(a, b)}; });
    }
}

TEST_CASE("GELU's fast exact form gives the bits of its definition, forward and backward", "[kernels][gelu]") {
    manual_seed(8);
    // 7 elements (the baseline tail only), 1000 (blocks of 64, vector bodies
    // and a tail), 300,000 (split between two threads); values across erf's
    // seam at |x| / sqrt 2 = 0.875 and its clamp at 4, and beyond. With a
    // gradient to come the forward computes the slope as well; without one
    // (no_grad, as an evaluation runs) it does not.
    for (int64_t n : {7, 1000, 300000}) {
        Tensor x0 = randn({n}) * 3;
        Tensor dout = randn({n});
        require_same_bits("gelu, " + std::to_string(n) + " elements", [&] {
            Tensor x = leaf(x0);
            Tensor y = gelu(x);
            y.backward(dout);
            return std::vector<Tensor>{y.detach(), x.grad()};
        });
        require_same_bits("gelu under no_grad, " + std::to_string(n) + " elements", [&] {
            NoGradGuard no_grad;
            return std::vector<Tensor>{gelu(x0)};
        });
    }
    // The forward computes the slope gelu'(x) for the backward from the same
    // erf: the edges of float32 too (zeros, subnormals, the largest values,
    // infinities, NaN), 40 of them so that the vector loops see them.
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> edges = {0.0f, -0.0f,   1e-40f,   -1e-40f, 1e-30f, -1e-30f, 3.4e38f, -3.4e38f, inf,     -inf,
                                NAN,  1.2374f, -1.2374f, 5.6f,    -5.6f,  1e5f,    -1e5f,   0.4375f,  -0.875f, 2.0f};
    for (size_t i = 0; i < 20; ++i) edges.push_back(-edges[i] * 0.999f);
    Tensor dout = randn({static_cast<int64_t>(edges.size())});
    require_same_bits("gelu at float32's edges", [&] {
        Tensor x = leaf(from_vector(edges));
        Tensor y = gelu(x);
        y.backward(dout);
        return std::vector<Tensor>{y.detach(), x.grad()};
    });
}

TEST_CASE("a Linear's two gradient products on two threads give the bits of the two products", "[kernels][matmul]") {
    manual_seed(9);
    // fast::linear_gradients against the two fast::gemm calls it stands for
    // (Note [A Linear's gradients on two threads]): dW summed over the first
    // half of the rows by one thread and continued over the rest by the
    // other has the bits of one product over all of them. Cases: the
    // macbook preset's four Linears and its lm_head; an odd number of rows
    // (thread 0 takes one more) and a weight read through transposed
    // strides; in = 68 (C's last columns an edge tile's, which adds to C);
    // out just above kDotRows (5); dW 16 columns wide (thread 0 sums all
    // of it in one part) and 17 (a second part of one column); halves of
    // 51 rows with W^T's strides (with fast kernels off dx goes in pieces
    // of 8 rows, and the nested call's last piece of thread 0's rows is 3
    // rows, which must not run the dot products); three that
    // stay two products:
    // out = kDotRows, and 9 rows (halves of 5 and 4) with W^T's strides,
    // where the half of 4 rows would run the dot products, which add C at
    // the end; and a product too small to share. With each tile (the
    // AVX-512 one takes k in blocks of 512, the AVX2 one 256).
    struct Case {
        int64_t rows, out, in;
        bool w_transposed, split;
    };
    const std::vector<Case> cases = {{768, 384, 128, false, true}, {768, 128, 128, false, true},
                                     {768, 512, 128, false, true}, {768, 128, 512, false, true},
                                     {768, 65, 128, false, true},  {301, 130, 70, true, true},
                                     {300, 130, 68, false, true},  {400, 5, 300, false, true},
                                     {4000, 10, 16, false, true},  {2000, 20, 17, true, true},
                                     {102, 64, 96, true, true},    {400, 4, 400, false, false},
                                     {9, 300, 300, true, false},   {40, 16, 16, false, false}};
    using internal::GemmTile;
    using internal::MatrixRef;
    namespace fast = internal::fast;
    TwoThreads two;
    // Each tile, and the blocked kernel (fast kernels off: no tile runs),
    // whose pieces of dx go 8 rows at a time.
    for (GemmTile tile : {GemmTile::kAvx2, GemmTile::kAvx512, GemmTile::kPortable, GemmTile::kAuto}) {
        internal::GemmTileGuard guard(tile);
        std::optional<ReferenceKernelsGuard> blocked;
        if (tile == GemmTile::kAuto) blocked.emplace();
        for (const Case& c : cases) {
            INFO("tile " << static_cast<int>(tile) << ", rows " << c.rows << ", out " << c.out << ", in " << c.in
                         << (c.w_transposed ? ", W^T's strides" : ""));
            Tensor g = randn({c.rows, c.out}), x = randn({c.rows, c.in});
            Tensor w = c.w_transposed ? randn({c.in, c.out}).t() : randn({c.out, c.in});
            const MatrixRef<const float> mg{g.data_ptr<float>(), c.rows, c.out, c.out, 1};
            const MatrixRef<const float> mw{w.data_ptr<float>(), c.out, c.in, w.stride(0), w.stride(1)};
            const MatrixRef<const float> mx{x.data_ptr<float>(), c.rows, c.in, c.in, 1};
            Tensor dx = empty({c.rows, c.in}), dw = empty({c.out, c.in});
            Tensor dx_two = empty({c.rows, c.in}), dw_two = empty({c.out, c.in});
            fast::gemm(mg, mw, {dx.data_ptr<float>(), c.rows, c.in, c.in, 1}, false);
            fast::gemm({g.data_ptr<float>(), c.out, c.rows, 1, c.out}, mx, {dw.data_ptr<float>(), c.out, c.in, c.in, 1},
                       false);
            const int64_t runs = fast::linear_gradients_runs();
            fast::linear_gradients(mg, mw, mx, {dx_two.data_ptr<float>(), c.rows, c.in, c.in, 1},
                                   {dw_two.data_ptr<float>(), c.out, c.in, c.in, 1});
            require_equal(dx_two, dx, "dx");
            require_equal(dw_two, dw, "dw");
            REQUIRE(fast::linear_gradients_runs() - runs == (c.split ? 1 : 0));
            // Inside a parallel loop its own loop cannot split: the calling
            // thread does thread 0's part, then takes every piece left from
            // the other end (Note [Taking work from the other end]): dW's
            // columns from the right, then thread 1's rows of dx from the
            // bottom. The same bits.
            Tensor dx_nested = empty({c.rows, c.in}), dw_nested = empty({c.out, c.in});
            parallel_for(0, 2, 1, [&](int64_t b, int64_t) {
                if (b == 0)
                    fast::linear_gradients(mg, mw, mx, {dx_nested.data_ptr<float>(), c.rows, c.in, c.in, 1},
                                           {dw_nested.data_ptr<float>(), c.out, c.in, c.in, 1});
            });
            require_equal(dx_nested, dx, "dx, nested");
            require_equal(dw_nested, dw, "dw, nested");
            REQUIRE(fast::linear_gradients_runs() - runs == (c.split ? 2 : 0));
        }
    }
}
