// Unary functions (core/ops/unary.cpp): values and gradients against PyTorch,
// gradient checks, special values (inf, nan, -0.0) and dtype rules; a rotary
// position embedding written with sin and cos, against PyTorch and the math.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

// A rotary position embedding (RoPE) as the notebooks write it, with ember's
// public ops only: channel pair i of position t turns by the angle
// t / base^(2i/hs). x (..., T, hs) -> (..., T, hs). Their PyTorch twins are
// in tests/fixtures/fx_unary.py.
Tensor rope_angles(int64_t T, int64_t hs, double base = 10000.0) {
    Tensor inv_freq = 1.0 / pow(base, arange(0, hs, 2).to(kFloat32) / hs); // (hs/2)
    return outer(arange(T).to(kFloat32), inv_freq);                        // (T, hs/2)
}

// Pairs channel i with i + hs/2 (LLaMA, as Raschka and Hugging Face write it).
Tensor rope_half(const Tensor& x) {
    const int64_t T = x.size(-2), hs = x.size(-1);
    Tensor angles = rope_angles(T, hs);
    angles = cat({angles, angles}, -1); // (T, hs)
    Tensor x1 = x.slice(-1, 0, hs / 2), x2 = x.slice(-1, hs / 2);
    Tensor rotated = cat({-x2, x1}, -1);
    return x * angles.cos() + rotated * angles.sin();
}

// Pairs channels 2i and 2i+1 (GPT-J's rotate_every_two).
Tensor rope_interleaved(const Tensor& x) {
    const int64_t T = x.size(-2), hs = x.size(-1);
    Tensor angles = rope_angles(T, hs);
    Tensor c = angles.cos().repeat_interleave(2, -1), s = angles.sin().repeat_interleave(2, -1); // (T, hs)
    Tensor x1 = x.slice(-1, 0, None, 2), x2 = x.slice(-1, 1, None, 2);
    Tensor rotated = stack({-x2, x1}, -1).flatten(-2);
    return x * c + rotated * s;
}

const std::vector<OpCase>& unary_cases() {
    using V = const std::vector<Tensor>&;
    static const std::vector<OpCase> all = {
        {"neg", [](V in) { return -in[0]; }},
        {"exp", [](V in) { return exp(in[0]); }},
        {"log", [](V in) { return log(in[0]); }},
        {"sqrt", [](V in) { return in[0].sqrt(); }},
        {"tanh", [](V in) { return tanh(in[0]); }},
        {"sigmoid", [](V in) { return sigmoid(in[0]); }},
        {"relu", [](V in) { return relu(in[0]); }},
        {"gelu", [](V in) { return gelu(in[0]); }},
        {"gelu_tanh", [](V in) { return gelu(in[0], "tanh"); }},
        {"abs", [](V in) { return abs(in[0]); }},
        {"exp.transposed", [](V in) { return in[0].t().exp(); }},
        {"tanh.float64", [](V in) { return tanh(in[0]); }},
        {"gelu.float64", [](V in) { return gelu(in[0]); }},
        {"composite", [](V in) { return sqrt(exp(sigmoid(in[0]) * tanh(in[0]))); }},
        {"int.exp", [](V in) { return exp(in[0]); }},
        {"int.neg_abs_relu", [](V in) { return abs(-in[0]) - relu(in[0]); }},
        {"sin", [](V in) { return in[0].sin(); }},
        {"cos", [](V in) { return in[0].cos(); }},
        {"sin.float64", [](V in) { return sin(in[0]); }},
        {"cos.transposed", [](V in) { return in[0].t().cos(); }},
        {"int.sin_cos", [](V in) { return in[0].sin() + in[0].cos(); }},
        {"rotary.half", [](V in) { return rope_half(in[0]); }},
        {"rotary.interleaved", [](V in) { return rope_interleaved(in[0]); }},
        {"reciprocal", [](V in) { return reciprocal(in[0]); }},
        {"reciprocal.float64", [](V in) { return reciprocal(in[0]); }},
        {"int.reciprocal", [](V in) { return reciprocal(in[0]); }},
    };
    return all;
}

} // namespace

TEST_CASE("unary ops match PyTorch's values and gradients", "[unary]") {
    check_cases(fixtures("unary"), unary_cases());
}

TEST_CASE("unary ops pass the finite-difference gradient check", "[unary][gradcheck]") {
    check_cases_gradients(fixtures("unary"), unary_cases());
}

TEST_CASE("large elementwise results do not depend on the thread count", "[unary][parallel]") {
    // 200000 elements: far past the size at which loops split across threads.
    manual_seed(3);
    Tensor x = randn({400, 500}).t(); // strided, too
    int threads = get_num_threads();
    set_num_threads(1);
    Tensor one = gelu(exp(x) * x + sigmoid(x));
    set_num_threads(std::max(2, threads));
    Tensor many = gelu(exp(x) * x + sigmoid(x));
    set_num_threads(threads);
    require_equal(one, many);
}

TEST_CASE("unary ops handle inf, nan and signed zero as PyTorch does", "[unary]") {
    Tensor x = fixtures("unary").tensor("special.in");
    require_close(exp(x), fixtures("unary").tensor("special.exp"), {}, "exp");
    require_close(tanh(x), fixtures("unary").tensor("special.tanh"), {}, "tanh");
    require_close(sigmoid(x), fixtures("unary").tensor("special.sigmoid"), {}, "sigmoid");
    require_equal(relu(x), fixtures("unary").tensor("special.relu"), "relu keeps nan");
    require_equal(abs(x), fixtures("unary").tensor("special.abs"), "abs");
    require_equal(-x, fixtures("unary").tensor("special.neg"), "neg flips the sign of zero");
    require_close(gelu(x), fixtures("unary").tensor("special.gelu"), {}, "gelu");
    require_close(gelu(x, "tanh"), fixtures("unary").tensor("special.gelu_tanh"), {}, "gelu tanh");
    require_close(sin(x), fixtures("unary").tensor("special.sin"), {}, "sin");
    require_close(cos(x), fixtures("unary").tensor("special.cos"), {}, "cos");
}

TEST_CASE("a rotary embedding makes scores depend on relative position only", "[unary][rotary]") {
    // RoPE turns q at position m by m*theta and k at position n by n*theta, so
    // their dot product depends on n - m alone: with the same q and k at every
    // position, scores (T,T) are constant along each diagonal.
    manual_seed(7);
    const int64_t T = 6, hs = 8;
    Tensor q = randn({1, hs}).expand({T, hs}), k = randn({1, hs}).expand({T, hs});
    for (auto rope : {rope_half, rope_interleaved}) {
        Tensor scores = matmul(rope(q), rope(k).t()); // (T,T)
        for (int64_t i = 0; i + 1 < T; ++i)
            for (int64_t j = 0; j + 1 < T; ++j)
                CHECK(scores[i + 1][j + 1].item() == Approx(scores[i][j].item()).epsilon(1e-5).margin(1e-5));
        // And the turn keeps each pair's length: |rope(q)| = |q| at every position.
        require_close(rope(q).pow(2).sum(-1), q.pow(2).sum(-1), {1e-5, 1e-5});
    }
}

TEST_CASE("unary ops keep or promote dtypes as PyTorch does", "[unary]") {
    Tensor i = tensor({-1, 2});
    CHECK(exp(i).dtype() == kFloat32);
    CHECK(relu(i).dtype() == kInt64);
    CHECK(abs(i).dtype() == kInt64);
    CHECK(tanh(ones({2}, kFloat64)).dtype() == kFloat64);
    CHECK(sin(i).dtype() == kFloat32);
    CHECK(cos(ones({2}, kBool)).dtype() == kFloat32);
    CHECK(cos(ones({2}, kFloat64)).dtype() == kFloat64);
}

TEST_CASE("unary ops reject what they cannot compute", "[unary][errors]") {
    CHECK_THROWS_WITH(gelu(ones({2}), "fast"), Catch::Contains("[gelu]") && Catch::Contains("fast"));
    CHECK_THROWS_AS(neg(ones({2}, kBool)), DTypeError);
    CHECK_THROWS_WITH(abs(ones({2}, kBool)), Catch::Contains("[abs]") && Catch::Contains("bool"));
    // sin and cos take every dtype (bool and int64 compute in float32), so
    // the one thing they refuse is a tensor that is not there.
    CHECK_THROWS_WITH(sin(Tensor()), Catch::Contains("undefined"));
    CHECK_THROWS_WITH(cos(Tensor()), Catch::Contains("undefined"));
}
