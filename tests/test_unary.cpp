// Unary functions (core/ops/unary.cpp): values and gradients against PyTorch,
// gradient checks, special values (inf, nan, -0.0) and dtype rules.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

const std::vector<OpCase>& cases() {
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
        {"reciprocal", [](V in) { return reciprocal(in[0]); }},
        {"reciprocal.float64", [](V in) { return reciprocal(in[0]); }},
        {"int.reciprocal", [](V in) { return reciprocal(in[0]); }},
    };
    return all;
}

} // namespace

TEST_CASE("unary ops match PyTorch's values and gradients", "[unary]") { check_cases(fixtures("unary"), cases()); }

TEST_CASE("unary ops pass the finite-difference gradient check", "[unary][gradcheck]") {
    check_cases_gradients(fixtures("unary"), cases());
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
}

TEST_CASE("unary ops keep or promote dtypes as PyTorch does", "[unary]") {
    Tensor i = tensor({-1, 2});
    CHECK(exp(i).dtype() == kFloat32);
    CHECK(relu(i).dtype() == kInt64);
    CHECK(abs(i).dtype() == kInt64);
    CHECK(tanh(ones({2}, kFloat64)).dtype() == kFloat64);
}

TEST_CASE("unary ops reject what they cannot compute", "[unary][errors]") {
    CHECK_THROWS_WITH(gelu(ones({2}), "fast"), Catch::Contains("[gelu]") && Catch::Contains("fast"));
    CHECK_THROWS_AS(neg(ones({2}, kBool)), DTypeError);
    CHECK_THROWS_WITH(abs(ones({2}, kBool)), Catch::Contains("[abs]") && Catch::Contains("bool"));
}
