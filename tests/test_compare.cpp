// Comparisons, masked_fill and where (core/ops/compare.cpp) against PyTorch.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("comparisons give PyTorch's bool masks, broadcasting", "[compare]") {
    const Fixtures& f = fixtures("compare");
    Tensor a = f.tensor("in.a"), b = f.tensor("in.b");
    require_equal(a == b, f.tensor("eq.tensor"), "==");
    require_equal(a != b, f.tensor("ne.tensor"), "!=");
    require_equal(a < b, f.tensor("lt.tensor"), "<");
    require_equal(a <= b, f.tensor("le.tensor"), "<=");
    require_equal(a > b, f.tensor("gt.tensor"), ">");
    require_equal(a >= b, f.tensor("ge.tensor"), ">=");
    require_equal(eq(a, 3), f.tensor("eq.scalar"), "== 3");
    require_equal(ne(a, 3), f.tensor("ne.scalar"), "!= 3");
    require_equal(lt(a, 3), f.tensor("lt.scalar"), "< 3");
    require_equal(le(a, 3), f.tensor("le.scalar"), "<= 3");
    require_equal(gt(a, 3), f.tensor("gt.scalar"), "> 3");
    require_equal(ge(a, 3), f.tensor("ge.scalar"), ">= 3");
}

TEST_CASE("masked_fill and where match PyTorch's values and gradients", "[compare]") {
    const Fixtures& f = fixtures("compare");
    Tensor tril = ember::tril(ones({4, 4}));
    OpFn causal = [&](const std::vector<Tensor>& in) { return softmax(in[0].masked_fill(tril == 0, -INFINITY), -1); };
    check_case(f, "masked_fill.causal", causal);
    check_gradients(f, "masked_fill.causal", causal);

    OpFn row_mask = [](const std::vector<Tensor>& in) { return masked_fill(in[0], tensor({true, false, true}), 0.5); };
    check_case(f, "masked_fill.broadcast_mask", row_mask);
    check_gradients(f, "masked_fill.broadcast_mask", row_mask);
    check_case(f, "masked_fill.broadcast_both", [](const std::vector<Tensor>& in) {
        return masked_fill(in[0], ones({2, 3}, kBool), 1.0);
    });

    Tensor cond = f.tensor("where.cond");
    OpFn w = [&](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); };
    check_case(f, "where", w);
    check_gradients(f, "where", w);
    check_case(f, "where.scalar", [&](const std::vector<Tensor>& in) { return where(cond, in[0], 0.0); });
    require_equal(masked_fill(tensor({1, 2, 3}), tensor({true, false, true}), 2.7), f.tensor("masked_fill.int"));
}

TEST_CASE("masked_fill_ fills in place and records the gradient", "[compare][inplace]") {
    // Raschka's attention: scores.masked_fill_(mask, -inf) on a non-leaf.
    Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64).requires_grad_();
    Tensor scores = x * 2;
    scores.masked_fill_(tensor({{false, true}, {false, false}}), -INFINITY);
    Tensor loss = sum(softmax(scores, -1) * tensor({{1.0, 0.0}, {1.0, 0.0}}, kFloat64));
    loss.backward();
    // Row 0 is [2, -inf]: softmax is [1, 0] whatever x, so its gradient is 0.
    // Row 1: d/dx softmax(2x)_0 = 2 s0 (1 - s0) at x1, -2 s0 (1 - s0) at x2.
    double s0 = 1.0 / (1.0 + std::exp(2.0));
    require_close(x.grad(), tensor({{0.0, 0.0}, {2 * s0 * (1 - s0), -2 * s0 * (1 - s0)}}, kFloat64));
}

TEST_CASE("masked_fill_ with a mask that views its own target", "[compare][inplace]") {
    Tensor x = tensor({{true, true}, {true, false}});
    x.masked_fill_(x[0], false); // every column is masked: all false
    require_equal(x, tensor({{false, false}, {false, false}}));
    CHECK_THROWS_AS(zeros({1}).expand({4}).masked_fill_(ones({4}, kBool), 1), ValueError);
}

TEST_CASE("masks must be bool and must fit", "[compare][errors]") {
    CHECK_THROWS_AS(masked_fill(ones({2, 2}), ones({2, 2}), 0), DTypeError);
    CHECK_THROWS_WITH(masked_fill(ones({2, 2}), ones({2, 2}), 0),
                      Catch::Contains("[masked_fill]") && Catch::Contains("bool"));
    CHECK_THROWS_AS(masked_fill(ones({2, 2}), ones({3}, kBool), 0), ShapeError);
    CHECK_THROWS_AS(ones({2}).masked_fill_(ones({2, 2}, kBool), 0), ShapeError);
    CHECK_THROWS_AS(where(ones({2}), ones({2}), ones({2})), DTypeError);
    CHECK_THROWS_WITH(where(ones({2}, kBool), ones({3}), ones({2})), Catch::Contains("[where]"));
    CHECK_THROWS_AS(ones({2}) == ones({3}), ShapeError);
}
