// layer_norm (core/ops/layer_norm.cpp): values and gradients of input, weight and
// bias against PyTorch, gradient checks, and errors.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

const std::vector<OpCase>& layer_norm_cases() {
    using V = const std::vector<Tensor>&;
    // One case per line (clang-format would split the lambdas that hold braces).
    // clang-format off
    static const std::vector<OpCase> all = {
        {"affine", [](V in) { return layer_norm(in[0], {4}, in[1], in[2]); }},
        {"no_affine", [](V in) { return layer_norm(in[0], {5}); }},
        {"two_dims", [](V in) { return layer_norm(in[0], {3, 4}, in[1], in[2]); }},
        {"eps", [](V in) { return layer_norm(in[0], {6}, in[1], in[2], 1e-2); }},
        // Large offsets make PyTorch's float32 statistics round differently
        // from ember's double ones: a looser tolerance.
        {"offset_values", [](V in) { return layer_norm(in[0] * 100 + 5000, {8}, in[1], in[2]); }, true, {1e-4, 1e-4}},
        {"float64", [](V in) { return layer_norm(in[0], {4}, in[1], in[2]); }},
        {"transposed", [](V in) { return layer_norm(in[0].transpose(1, 2), {4}, in[1], in[2]); }},
        {"gpt_row", [](V in) { return layer_norm(in[0], {32}, in[1], in[2]); }},
    };
    // clang-format on
    return all;
}

} // namespace

TEST_CASE("layer_norm matches PyTorch's values and gradients", "[layer_norm]") {
    check_cases(fixtures("layer_norm"), layer_norm_cases());
}

TEST_CASE("layer_norm passes the finite-difference gradient check", "[layer_norm][gradcheck]") {
    check_cases_gradients(fixtures("layer_norm"), layer_norm_cases());
}

TEST_CASE("layer_norm normalises each row to mean 0 and variance 1", "[layer_norm]") {
    Tensor x = tensor({{1.0, 2.0, 3.0, 4.0}, {-5.0, 0.0, 5.0, 10.0}}, kFloat64);
    Tensor y = layer_norm(x, {4}, {}, {}, 0.0);
    require_close(mean(y, -1), zeros({2}, kFloat64), {0, 1e-12});
    require_close(var(y, -1, /*unbiased=*/false), ones({2}, kFloat64), {1e-12, 1e-12});
}

TEST_CASE("layer_norm rejects shapes and dtypes that do not fit", "[layer_norm][errors]") {
    CHECK_THROWS_AS(layer_norm(ones({2, 3}), {4}), ShapeError);
    CHECK_THROWS_WITH(layer_norm(ones({2, 3}), {4}), Catch::Contains("[layer_norm]") && Catch::Contains("(2,3)"));
    CHECK_THROWS_AS(layer_norm(ones({2, 3}), {}), ShapeError);
    CHECK_THROWS_WITH(layer_norm(ones({2, 3}), {3}, ones({4})), Catch::Contains("weight") && Catch::Contains("(4)"));
    CHECK_THROWS_AS(layer_norm(ones({2, 3}), {3}, ones({3}, kFloat64)), DTypeError);
    CHECK_THROWS_AS(layer_norm(ones({2, 3}, kInt64), {3}), DTypeError);
    CHECK_THROWS_AS(layer_norm(ones({2, 3}), {3}, {}, {}, -1.0), ValueError);
}
