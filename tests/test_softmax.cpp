// softmax, log_softmax and scaled_masked_softmax (core/ops/softmax.cpp) against
// PyTorch, with gradient checks, stability for large logits, fully masked
// rows, and the fused op's bits against the ops it fuses.
#include <cmath>

#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

const std::vector<OpCase>& softmax_cases() {
    using V = const std::vector<Tensor>&;
    static const std::vector<OpCase> all = {
        {"softmax.last", [](V in) { return softmax(in[0], -1); }},
        {"softmax.dim0", [](V in) { return softmax(in[0], 0); }},
        {"softmax.middle", [](V in) { return in[0].softmax(1); }},
        {"softmax.large_logits", [](V in) { return softmax(in[0] * 100, -1); }},
        {"softmax.transposed", [](V in) { return softmax(in[0].t(), -1); }},
        {"softmax.float64", [](V in) { return softmax(in[0], -1); }},
        {"log_softmax.last", [](V in) { return log_softmax(in[0], -1); }},
        {"log_softmax.dim0", [](V in) { return log_softmax(in[0], 0); }},
        {"log_softmax.large_logits", [](V in) { return log_softmax(in[0] * 100, -1); }},
        {"scaled_masked.head", [](V in) { return scaled_masked_softmax(in[0], in[1], std::pow(8.0, -0.5)); }},
        {"scaled_masked.batched", [](V in) { return scaled_masked_softmax(in[0], in[1], std::pow(16.0, -0.5)); }},
        {"scaled_masked.no_mask", [](V in) { return scaled_masked_softmax(in[0], Tensor(), 0.3); }},
        {"scaled_masked.broadcast", [](V in) { return scaled_masked_softmax(in[0], in[1], 3.0); }},
        {"scaled_masked.float64", [](V in) { return scaled_masked_softmax(in[0], in[1], 0.7); }},
    };
    return all;
}

} // namespace

TEST_CASE("softmax and log_softmax match PyTorch's values and gradients", "[softmax]") {
    check_cases(fixtures("softmax"), softmax_cases());
}

TEST_CASE("softmax and log_softmax pass the finite-difference gradient check", "[softmax][gradcheck]") {
    check_cases_gradients(fixtures("softmax"), softmax_cases());
}

TEST_CASE("the averaging trick: softmax over a causal mask gives running means", "[softmax]") {
    // the averaging trick, version 3: wei = zeros.masked_fill(tril == 0, -inf); softmax(wei, 1)
    Tensor wei = zeros({3, 3}).masked_fill(tril(ones({3, 3})) == 0, -INFINITY);
    require_equal(wei, fixtures("softmax").tensor("averaging.in"));
    require_close(softmax(wei, 1), fixtures("softmax").tensor("averaging.out"));
}

TEST_CASE("a fully masked row gives NaN, as in PyTorch", "[softmax]") {
    require_close(softmax(full({2, 3}, -INFINITY), -1), fixtures("softmax").tensor("all_masked.out"));
}

TEST_CASE("softmax rejects bad dims and dtypes", "[softmax][errors]") {
    CHECK_THROWS_AS(softmax(ones({2, 3}), 2), IndexError);
    CHECK_THROWS_WITH(softmax(ones({2, 3}), 2), Catch::Contains("[softmax]"));
    CHECK_THROWS_AS(log_softmax(ones({2}, kInt64), 0), DTypeError);
}

// The fused op promises the bits of the lines it replaces, so a model's
// numbers do not change when its attention runs through it. At a head size
// whose square root is not a power of two.
TEST_CASE("scaled_masked_softmax has the bits of scale, masked_fill and softmax one by one", "[softmax]") {
    manual_seed(7);
    const int64_t T = 13;
    // The lecture's mask; the same one sliced out of a larger buffer (rows
    // 2T apart); and a transposed one (each row starting 1 apart).
    Tensor big = tril(ones({2 * T, 2 * T})) == 0;
    Tensor masks[] = {tril(ones({T, T})) == 0, big.index({Slice(0, T), Slice(0, T)}), (tril(ones({T, T})) == 0).t()};
    for (const Tensor& causal : masks) {
        const double s = std::pow(8.0, -0.5);
        Tensor x = (randn({3, 4, T, T}) * 4).requires_grad_();
        Tensor x2 = x.detach().clone().requires_grad_();
        Tensor g = randn({3, 4, T, T});
        Tensor fused = scaled_masked_softmax(x, causal, s);
        Tensor unfused = softmax((x2 * s).masked_fill(causal, -INFINITY), -1);
        require_equal(fused, unfused, "weights");
        fused.backward(g);
        unfused.backward(g);
        require_equal(x.grad(), x2.grad(), "gradients");
        // The masked positions get exactly zero, forward and back.
        REQUIRE(sum(fused.masked_fill(causal == 0, 0)).item() == 0);
        REQUIRE(sum(abs(x.grad()).masked_fill(causal == 0, 0)).item() == 0);
    }
    // A mask that differs per batch element and is broadcast over the heads,
    // on enough rows of 64 (3 x 4 x 64) to be split between threads: each
    // thread's first row must find its own mask row, forward and back.
    int threads = get_num_threads();
    set_num_threads(std::max(2, threads));
    Tensor mask = rand({3, 1, 64, 64}) + eye(64) * 2 < 0.3; // never the diagonal: no row is all masked
    Tensor x = (randn({3, 4, 64, 64}) * 4).requires_grad_();
    Tensor x2 = x.detach().clone().requires_grad_();
    Tensor g = randn({3, 4, 64, 64});
    Tensor fused = scaled_masked_softmax(x, mask, 0.125);
    Tensor unfused = softmax((x2 * 0.125).masked_fill(mask, -INFINITY), -1);
    require_equal(fused, unfused, "weights, per-batch mask");
    fused.backward(g);
    unfused.backward(g);
    set_num_threads(threads);
    require_equal(x.grad(), x2.grad(), "gradients, per-batch mask");
}

TEST_CASE("scaled_masked_softmax rejects bad masks, scales and dtypes", "[softmax][errors]") {
    Tensor x = ones({2, 3, 3});
    CHECK_THROWS_AS(scaled_masked_softmax(x, ones({3, 3}), 1.0), DTypeError);
    CHECK_THROWS_AS(scaled_masked_softmax(x, ones({4, 3}) == 0, 1.0), ShapeError);
    CHECK_THROWS_AS(scaled_masked_softmax(x, ones({5, 2, 3, 3}) == 0, 1.0), ShapeError); // wider than x
    CHECK_THROWS_WITH(scaled_masked_softmax(x, ones({4, 3}) == 0, 1.0), Catch::Contains("[scaled_masked_softmax]") &&
                                                                            Catch::Contains("(4,3)") &&
                                                                            Catch::Contains("(2,3,3)"));
    CHECK_THROWS_AS(scaled_masked_softmax(x, Tensor(), 0.0), ValueError);
    CHECK_THROWS_AS(scaled_masked_softmax(x, Tensor(), -1.0), ValueError);
    CHECK_THROWS_AS(scaled_masked_softmax(x, Tensor(), INFINITY), ValueError);
    CHECK_THROWS_AS(scaled_masked_softmax(x, Tensor(), 1e39), ValueError);  // inf in float32
    CHECK_THROWS_AS(scaled_masked_softmax(x, Tensor(), 1e-50), ValueError); // 0 in float32
    CHECK_THROWS_AS(scaled_masked_softmax(ones({2, 3}, kInt64), Tensor(), 1.0), DTypeError);
    CHECK_THROWS_AS(scaled_masked_softmax(full({}, 1.0), Tensor(), 1.0), ShapeError);
    // Empty rows: an empty result, still on the graph like the unfused ops'.
    Tensor empty_rows = scaled_masked_softmax(ones({2, 0}).requires_grad_(), Tensor(), 1.0);
    REQUIRE(empty_rows.shape() == Shape{2, 0});
    REQUIRE(empty_rows.requires_grad());
}
