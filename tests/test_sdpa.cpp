// scaled_dot_product_attention (core/ops/attention.cpp): against PyTorch's
// definition of it (fixtures), against ember's unfused ops (outputs and
// gradients within 1e-5 relative, with and without dropout, causal and not,
// T not a multiple of the 64-row block), the gradient check, the thread
// count, and every error.
#include <cmath>

#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

// The fused op's float32 results differ from the unfused ops' in rounding
// (the online softmax sums in another order): compared within this relative
// tolerance, elementwise with an absolute floor of 1e-5 times the largest.
constexpr double kRelative = 1e-5;

Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = {}, double p = 0.0,
            bool causal = false, std::optional<double> scale = std::nullopt) {
    return scaled_dot_product_attention(q, k, v, mask, p, causal, scale);
}

const std::vector<OpCase>& sdpa_cases() {
    using V = const std::vector<Tensor>&;
    static const Fixtures& f = fixtures("sdpa");
    static const std::vector<OpCase> all = {
        {"plain", [](V in) { return sdpa(in[0], in[1], in[2]); }},
        {"causal", [](V in) { return sdpa(in[0], in[1], in[2], {}, 0.0, true); }},
        {"causal_rect", [](V in) { return sdpa(in[0], in[1], in[2], {}, 0.0, true); }},
        {"scale", [](V in) { return sdpa(in[0], in[1], in[2], {}, 0.0, false, 0.3); }},
        {"broadcast", [](V in) { return sdpa(in[0], in[1], in[2], {}, 0.0, true); }},
        {"unbatched", [](V in) { return sdpa(in[0], in[1], in[2]); }},
        {"bool_mask", [](V in) { return sdpa(in[0], in[1], in[2], f.tensor("bool_mask.mask")); }},
        {"float_mask", [](V in) { return sdpa(in[0], in[1], in[2], f.tensor("float_mask.mask").to(in[0].dtype())); }},
        {"long_causal", [](V in) { return sdpa(in[0], in[1], in[2], {}, 0.0, true); }},
        {"float64", [](V in) { return sdpa(in[0], in[1], in[2], {}, 0.0, true); }},
        {"dropout",
         [](V in) {
             manual_seed(7); // the fixture's seed: the same weights dropped
             return sdpa(in[0], in[1], in[2], {}, 0.3, true);
         }},
        {"masked_row", [](V in) { return sdpa(in[0], in[1], in[2], f.tensor("masked_row.mask")); }, false},
    };
    return all;
}

// The unfused ops of PyTorch's definition, in ember: what the fused op computes.
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double p, bool causal) {
    const int64_t L = q.size(-2), S = k.size(-2);
    Tensor s = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
    if (causal) s = s.masked_fill(triu(ones({L, S}), 1).to(kBool), -INFINITY);
    if (mask.defined()) s = mask.dtype() == kBool ? s.masked_fill(mask == false, -INFINITY) : s + mask;
    Tensor w = softmax(s, -1);
    if (p > 0) w = dropout(w, p);
    return matmul(w, v);
}

// |a - b| <= kRelative * max(|b|, max |b| * 1e-1) elementwise: relative,
// with a floor at a tenth of the tensor's scale for entries near zero.
void require_relative(const Tensor& a, const Tensor& b, const std::string& what) {
    const double scale = max(abs(b)).to(kFloat64).item<double>();
    require_close(a, b, {kRelative, kRelative * 0.1 * scale}, what);
}

struct Layout {
    int64_t B, NH, L, S, E;
};

// Fused against unfused, forward and every input's gradient, after the same seed.
void compare_with_unfused(const Layout& s, const Tensor& mask, double p, bool causal) {
    manual_seed(11);
    Tensor q = randn({s.B, s.NH, s.L, s.E}), k = randn({s.B, s.NH, s.S, s.E}), v = randn({s.B, s.NH, s.S, s.E});
    Tensor dout = randn({s.B, s.NH, s.L, s.E});
    std::vector<Tensor> results[2];
    for (int fused = 0; fused < 2; ++fused) {
        Tensor qi = q.clone().requires_grad_(), ki = k.clone().requires_grad_(), vi = v.clone().requires_grad_();
        manual_seed(5);
        Tensor out = fused ? sdpa(qi, ki, vi, mask, p, causal) : unfused(qi, ki, vi, mask, p, causal);
        out.backward(dout);
        results[fused] = {out, qi.grad(), ki.grad(), vi.grad()};
    }
    const char* names[] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; ++i) require_relative(results[1][i], results[0][i], names[i]);
}

} // namespace

TEST_CASE("scaled_dot_product_attention matches PyTorch's definition", "[sdpa]") {
    std::vector<OpCase> all = sdpa_cases();
    for (OpCase& c : all) c.tol = {1e-5, 1e-5}; // float32 rounding of an online softmax
    check_cases(fixtures("sdpa"), all);
}

// long_causal (T = 70: 3,360 inputs, two forward passes each) on its own: [heavy], so
// that the unoptimised sanitizer build leaves it to the others.
TEST_CASE("scaled_dot_product_attention passes the finite-difference gradient check", "[sdpa][gradcheck]") {
    std::vector<OpCase> short_cases;
    for (const OpCase& c : sdpa_cases())
        if (c.name != "long_causal") short_cases.push_back(c);
    check_cases_gradients(fixtures("sdpa"), short_cases);
}

TEST_CASE("scaled_dot_product_attention: the gradient check over 70 positions", "[sdpa][gradcheck][heavy]") {
    std::vector<OpCase> long_case;
    for (const OpCase& c : sdpa_cases())
        if (c.name == "long_causal") long_case.push_back(c);
    REQUIRE(long_case.size() == 1);
    check_cases_gradients(fixtures("sdpa"), long_case);
}

TEST_CASE("fused attention equals the unfused ops within 1e-5 relative", "[sdpa]") {
    const Layout one_block{2, 3, 40, 40, 16}, several{1, 2, 150, 150, 32}, rectangular{1, 2, 70, 130, 8};
    SECTION("causal") {
        compare_with_unfused(one_block, {}, 0.0, true);
        compare_with_unfused(several, {}, 0.0, true);
    }
    SECTION("not causal") {
        compare_with_unfused(several, {}, 0.0, false);
        compare_with_unfused(rectangular, {}, 0.0, false);
    }
    SECTION("dropout, causal and not") {
        compare_with_unfused(several, {}, 0.2, true);
        compare_with_unfused(rectangular, {}, 0.5, false);
    }
    SECTION("a boolean and a float mask over the batch") {
        manual_seed(3);
        Tensor keep = rand({1, 2, 70, 130}) > 0.2;
        compare_with_unfused(rectangular, keep, 0.0, false);
        compare_with_unfused(rectangular, randn({70, 130}), 0.1, false);
    }
}

TEST_CASE("fused attention's dropout drops the weights dropout() drops", "[sdpa]") {
    // With v the identity, out is the dropped weights themselves.
    manual_seed(2);
    Tensor q = randn({2, 3, 20, 8}), k = randn({2, 3, 20, 8});
    Tensor v = eye(20).expand({2, 3, 20, 20});
    manual_seed(9);
    Tensor fused = sdpa(q, k, v, {}, 0.4, true);
    const float after_fused = rand({1}).item<float>();
    manual_seed(9);
    Tensor weights = unfused(q, k, v, {}, 0.4, true);
    const float after_unfused = rand({1}).item<float>();
    require_relative(fused, weights, "dropped weights");
    // The zeros are exactly where dropout put them.
    require_equal(fused == 0, weights == 0, "the dropped positions");
    // And the generator moved on by the same draws.
    CHECK(after_fused == after_unfused);
}

TEST_CASE("fused attention gives the same bits on 1 and 2 threads", "[sdpa][threads]") {
    manual_seed(4);
    Tensor q = randn({2, 4, 100, 16}).requires_grad_(), k = randn({2, 4, 100, 16}).requires_grad_();
    Tensor v = randn({2, 4, 100, 16}).requires_grad_();
    Tensor dout = randn({2, 4, 100, 16});
    std::vector<Tensor> results[2];
    const int before = get_num_threads();
    for (int threads = 1; threads <= 2; ++threads) {
        set_num_threads(threads);
        q.zero_grad(), k.zero_grad(), v.zero_grad();
        manual_seed(8);
        Tensor out = sdpa(q, k, v, {}, 0.1, true);
        out.backward(dout);
        results[threads - 1] = {out, q.grad(), k.grad(), v.grad()};
    }
    set_num_threads(before);
    for (int i = 0; i < 4; ++i) require_equal(results[0][i], results[1][i]);
}

TEST_CASE("scaled_dot_product_attention with no keys gives zeros, as softmax over nothing @ v", "[sdpa]") {
    Tensor q = randn({2, 3, 4}).requires_grad_();
    Tensor out = sdpa(q, zeros({2, 0, 4}), zeros({2, 0, 5}));
    require_equal(out, zeros({2, 3, 5}));
    out.sum().backward();
    require_equal(q.grad(), zeros({2, 3, 4}));
}

TEST_CASE("scaled_dot_product_attention names itself and the shapes in its errors", "[sdpa][errors]") {
    Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
    const auto op = Catch::Contains("[scaled_dot_product_attention]");
    CHECK_THROWS_AS(sdpa(randn({4}), k, v), ShapeError);
    CHECK_THROWS_WITH(sdpa(randn({4}), k, v), op);
    CHECK_THROWS_AS(sdpa(q, randn({2, 5, 3}), v), ShapeError); // E differs
    CHECK_THROWS_WITH(sdpa(q, randn({2, 5, 3}), v), Catch::Contains("(2,3,4)") && Catch::Contains("(2,5,3)"));
    CHECK_THROWS_AS(sdpa(q, k, randn({2, 4, 6})), ShapeError); // S differs
    CHECK_THROWS_AS(sdpa(q, randn({3, 5, 4}), v), ShapeError); // batch does not broadcast
    CHECK_THROWS_AS(sdpa(q.to(kInt64), k, v), DTypeError);
    CHECK_THROWS_AS(sdpa(q, k.to(kFloat64), v), DTypeError);
    CHECK_THROWS_AS(sdpa(q, k, v, ones({3, 5}).to(kInt64)), DTypeError);
    CHECK_THROWS_AS(sdpa(q, k, v, ones({4, 5}).to(kBool)), ShapeError);    // mask (L,S) wrong
    CHECK_THROWS_AS(sdpa(q, k, v, ones({3, 3, 5}).to(kBool)), ShapeError); // mask would enlarge the batch
    CHECK_THROWS_AS(sdpa(q, k, v, ones({3, 5}).to(kBool), 0.0, true), ValueError);
    CHECK_THROWS_AS(sdpa(q, k, v, {}, 1.5), ValueError);
    CHECK_THROWS_AS(sdpa(q, k, v, {}, -0.1), ValueError);
    CHECK_THROWS_AS(sdpa(q, k, v, zeros({3, 5}).requires_grad_()), ValueError);
    CHECK_THROWS_WITH(sdpa(q, k, v, {}, 1.5), op);
    // Views (expand) may claim 2^40 positions: the (L,S) weights' 2^80
    // elements are refused by name before any size is multiplied out.
    const int64_t n = int64_t{1} << 40;
    Tensor big = ones({1, 1}).expand({n, 1});
    CHECK_THROWS_WITH(sdpa(big, big, big), op && Catch::Contains("too many elements"));
    CHECK_THROWS_WITH(sdpa(big, big, big, {}, 0.0, true), op && Catch::Contains("too many elements"));
}
