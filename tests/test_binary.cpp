// Arithmetic (core/ops/binary.cpp): values and gradients against PyTorch, a
// finite-difference gradient check per op, type promotion, in-place forms
// and their errors.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

const std::vector<OpCase>& binary_cases() {
    using V = const std::vector<Tensor>&;
    static const std::vector<OpCase> all = {
        {"add.same", [](V in) { return in[0] + in[1]; }},
        {"add.broadcast", [](V in) { return in[0] + in[1]; }},
        {"add.scalar", [](V in) { return in[0] + 2.5; }},
        {"add.transposed", [](V in) { return in[0].t() + in[1]; }},
        {"sub.broadcast", [](V in) { return in[0] - in[1]; }},
        {"sub.scalar", [](V in) { return in[0] - 1.5; }},
        {"rsub.scalar", [](V in) { return 1.5 - in[0]; }},
        {"mul.broadcast", [](V in) { return in[0] * in[1]; }},
        {"mul.scalar", [](V in) { return in[0] * -0.5; }},
        {"mul.self", [](V in) { return in[0] * in[0]; }},
        {"div.broadcast", [](V in) { return in[0] / in[1]; }},
        {"div.scalar", [](V in) { return in[0] / 3.0; }},
        {"rdiv.scalar", [](V in) { return 2.0 / in[0]; }},
        {"pow.2", [](V in) { return pow(in[0], 2); }},
        {"pow.3", [](V in) { return in[0].pow(3); }},
        {"pow.half", [](V in) { return pow(in[0], 0.5); }},
        {"pow.minus_half", [](V in) { return pow(in[0], -0.5); }},
        {"pow.minus_1", [](V in) { return pow(in[0], -1); }},
        {"pow.minus_2", [](V in) { return pow(in[0], -2); }},
        {"pow.1_7", [](V in) { return pow(in[0], 1.7); }},
        {"pow.0", [](V in) { return pow(in[0], 0); }},
        {"float64", [](V in) { return in[0] * in[1] + in[0] / in[1]; }},
        {"mixed.float_int", [](V in) { return in[0] + in[1]; }},
        {"mixed.float_double", [](V in) { return in[0] * in[1]; }},
        {"chain", [](V in) { return (in[0] * in[1] - in[0] / (in[1] * in[1] + 1)) * 2 - in[1]; }},
        {"int.add", [](V in) { return in[0] + in[1]; }},
        {"int.mul_scalar", [](V in) { return in[0] * 2; }},
        {"int.mul_float_scalar", [](V in) { return in[0] * 2.5; }},
        {"int.div", [](V in) { return in[0] / in[1]; }},
        {"int.pow", [](V in) { return pow(in[0], 3); }},
        {"int.sub_scalar", [](V in) { return 10 - in[0]; }},
        {"pow.scalar_base", [](V in) { return pow(10000.0, in[0]); }},
        {"pow.scalar_base_half", [](V in) { return pow(0.5, in[0]); }},
        // 0^e has an infinite slope at e = -1: no finite differences there.
        {"pow.zero_base", [](V in) { return pow(0.0, in[0]); }, false},
        {"int.pow_scalar_base", [](V in) { return pow(-2, in[0]); }},
        {"int.pow_float_base", [](V in) { return pow(2.5, in[0]); }},
        {"outer", [](V in) { return outer(in[0], in[1]); }},
        {"outer.int_float", [](V in) { return outer(in[0], in[1]); }},
        {"rdiv.scalar_10", [](V in) { return 10.0 / in[0]; }},
        {"rdiv.int", [](V in) { return 10 / in[0]; }},
    };
    return all;
}

} // namespace

TEST_CASE("binary ops match PyTorch's values and gradients", "[binary]") {
    check_cases(fixtures("binary"), binary_cases());
}

TEST_CASE("binary ops pass the finite-difference gradient check", "[binary][gradcheck]") {
    check_cases_gradients(fixtures("binary"), binary_cases());
}

TEST_CASE("result dtypes follow PyTorch's promotion", "[binary]") {
    Tensor f = ones({2});
    Tensor d = ones({2}, kFloat64);
    Tensor i = ones({2}, kInt64);
    CHECK((f + d).dtype() == kFloat64);
    CHECK((f + i).dtype() == kFloat32);
    CHECK((i + i).dtype() == kInt64);
    CHECK((i * 2).dtype() == kInt64);
    CHECK((i * 2.0).dtype() == kFloat32);
    CHECK((i / i).dtype() == kFloat32); // true division
    CHECK((d * 2.5f).dtype() == kFloat64);
    CHECK(pow(i, 2).dtype() == kInt64);
    CHECK(pow(2, i).dtype() == kInt64);
    CHECK(pow(2.0, i).dtype() == kFloat32);
    CHECK(pow(2, d).dtype() == kFloat64);
    CHECK(pow(2, ones({2}, kBool)).dtype() == kInt64);
    CHECK(pow(i, 0.5).dtype() == kFloat32);
}

TEST_CASE("a 0-d tensor raises the dtype only across categories, as in PyTorch", "[binary]") {
    Tensor f64_scalar = scalar_tensor(2.0, kFloat64);
    CHECK((ones({3}) * f64_scalar).dtype() == kFloat32);
    CHECK((tensor({1, 2}) * f64_scalar).dtype() == kFloat64);
    CHECK((tensor({true, false}) * scalar_tensor(3)).dtype() == kInt64);
    CHECK((f64_scalar * f64_scalar).dtype() == kFloat64);
    CHECK(where(tensor({true, false}), ones({2}), f64_scalar).dtype() == kFloat32);
}

TEST_CASE("bool arithmetic: + is or, * is and, - is refused (PyTorch's rules)", "[binary]") {
    Tensor a = tensor({true, true, false, false}), b = tensor({true, false, true, false});
    require_equal(a + b, tensor({true, true, true, false}));
    require_equal(a * b, tensor({true, false, false, false}));
    CHECK((a + 1).dtype() == kInt64);
}

TEST_CASE("integers stay exact beyond 2^53", "[binary]") {
    // Values from PyTorch 1.13.
    int64_t big = (int64_t{1} << 53) + 1;
    CHECK(full({1}, INT64_MAX).item<int64_t>() == INT64_MAX);
    CHECK(full({1}, big).item<int64_t>() == big);
    CHECK((tensor({big}) == big).item<bool>());
    CHECK((tensor({big}) - big).item<int64_t>() == 0);
    require_equal(pow(arange(3), INT64_MAX), tensor({0, 1, 0}));
}

TEST_CASE("scalar division divides by the scalar rounded to the tensor's dtype", "[binary]") {
    // PyTorch computes x / 3.0 on float32 as x / float(3.0), not x * (1/3.0).
    Tensor x = tensor({1.0f, 2.0f, 10.0f});
    Tensor y = x / 3.0;
    const float* p = y.data_ptr<float>();
    CHECK(p[0] == 1.0f / 3.0f);
    CHECK(p[1] == 2.0f / 3.0f);
    CHECK(p[2] == 10.0f / 3.0f);
}

TEST_CASE("a number divided by a tensor is PyTorch's reciprocal times the number", "[binary]") {
    // Python's 10.0 / f runs f.reciprocal() * 10.0 (torch.Tensor.__rtruediv__):
    // two roundings, whose bits differ from a true division's for 23 of
    // these 64 values; and the graph records PyTorch's two nodes.
    const Fixtures& f = fixtures("binary");
    Tensor x = f.tensor("rdiv.scalar_10.in0").requires_grad_();
    Tensor y = 10.0 / x;
    require_equal(y.detach(), f.tensor("rdiv.scalar_10.out"), "10.0 / x, bit for bit");
    CHECK(y.grad_fn()->name() == "MulBackward0");
    REQUIRE(y.grad_fn()->next_functions().size() == 1);
    CHECK(y.grad_fn()->next_functions()[0]->name() == "ReciprocalBackward0");
    CHECK(div(10.0, x).grad_fn()->name() == "MulBackward0");
    CHECK((x / 10.0).grad_fn()->name() == "DivBackward0"); // a tensor divided by a number stays a division
}

TEST_CASE("integer arithmetic wraps on overflow instead of undefined behaviour", "[binary]") {
    // Expected values as PyTorch 1.13 computes them.
    CHECK((tensor({int64_t{INT64_MAX}}) + 1).item<int64_t>() == INT64_MIN);
    CHECK((-tensor({int64_t{INT64_MIN}})).item<int64_t>() == INT64_MIN);
    CHECK(pow(tensor({int64_t{3}}), 41).item<int64_t>() == -420491770248316829LL);
    CHECK((tensor({int64_t{1} << 62}) * 4).item<int64_t>() == 0);
}

TEST_CASE("in-place arithmetic writes through views and records gradients", "[binary][inplace]") {
    Tensor base = zeros({2, 3});
    base.select(0, 1).add_(tensor({1.0f, 2.0f, 3.0f}));
    require_equal(base, tensor({{0.0f, 0.0f, 0.0f}, {1.0f, 2.0f, 3.0f}}));
    base.mul_(2).div_(4).add_(1);
    require_equal(base, tensor({{1.0f, 1.0f, 1.0f}, {1.5f, 2.0f, 2.5f}}));

    // y = (x * 3) then in place: y *= w, y += w, y -= x  =>  y = 3xw + w - x
    Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
    Tensor w = tensor({0.5, -1.0}, kFloat64).requires_grad_();
    Tensor y = x * 3;
    y.mul_(w);
    y.add_(w);
    y.sub_(x);
    sum(y).backward();
    require_close(x.grad(), 3 * w.detach() - 1); // d/dx = 3w - 1
    require_close(w.grad(), 3 * x.detach() + 1); // d/dw = 3x + 1
}

TEST_CASE("sub_ with a number and div_ with a tensor complete PyTorch's set", "[binary][inplace]") {
    // Values from the arithmetic: [7, 9] - 1 = [6, 8]; [6, 8] / [2, 4] = [3, 2].
    Tensor t = tensor({7.0f, 9.0f});
    t.sub_(1);
    require_equal(t, tensor({6.0f, 8.0f}));
    t.div_(tensor({2.0f, 4.0f}));
    require_equal(t, tensor({3.0f, 2.0f}));
    // A broadcast divisor, and a float64 0-d one rounded to float32 first.
    Tensor u = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
    u.div_(tensor({2.0f, 4.0f}));
    require_equal(u, tensor({{0.5f, 0.5f}, {1.5f, 1.0f}}));
    // y = (x * 3) - 2, then y /= w: y = (3x - 2) / w, so
    // dy/dx = 3 / w and dy/dw = -(3x - 2) / w^2.
    Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
    Tensor w = tensor({0.5, -4.0}, kFloat64).requires_grad_();
    Tensor y = x * 3;
    y.sub_(2);
    y.div_(w);
    CHECK(y.grad_fn()->name() == "DivBackward0");
    sum(y).backward();
    require_close(x.grad(), tensor({6.0, -0.75}, kFloat64));
    require_close(w.grad(), tensor({-4.0, -0.25}, kFloat64)); // -(1)/0.25, -(4)/16
}

TEST_CASE("in-place arithmetic rejects what it cannot do", "[binary][inplace][errors]") {
    Tensor leaf = ones({2}).requires_grad_();
    CHECK_THROWS_AS(leaf.add_(1), AutogradError);
    CHECK_THROWS_WITH(leaf.mul_(2), Catch::Contains("[mul_]") && Catch::Contains("leaf"));
    {
        NoGradGuard no_grad; // what an optimizer step does
        leaf.add_(1);
    }
    require_equal(leaf.detach(), tensor({2.0f, 2.0f}));

    Tensor i = ones({2}, kInt64);
    CHECK_THROWS_AS(i.add_(ones({2})), DTypeError);
    CHECK_THROWS_WITH(ones({2}).add_(ones({3, 2})), Catch::Contains("[add_]") && Catch::Contains("(3,2)"));
    Tensor expanded = ones({1, 3}).expand({2, 3});
    CHECK_THROWS_AS(expanded.add_(1), ValueError);
    CHECK_THROWS_AS(ones({2}, kBool) - ones({2}, kBool), DTypeError);
    CHECK_THROWS_WITH(tensor({true}).sub_(tensor({true})), Catch::Contains("[sub_]") && Catch::Contains("bool"));
    CHECK_THROWS_WITH(tensor({true}).sub_(1), Catch::Contains("[sub_]") && Catch::Contains("bool"));
    // True division of integers is float32, which an int64 tensor cannot hold.
    CHECK_THROWS_WITH(ones({2}, kInt64).div_(ones({2}, kInt64)), Catch::Contains("[div_]") && Catch::Contains("int64"));
}

TEST_CASE("binary ops name the op and both shapes when they do not broadcast", "[binary][errors]") {
    CHECK_THROWS_AS(ones({2, 3}) + ones({4}), ShapeError);
    CHECK_THROWS_WITH(ones({2, 3}) * ones({4}),
                      Catch::Contains("[mul]") && Catch::Contains("(2,3)") && Catch::Contains("(4)"));
    CHECK_THROWS_WITH(ones({3}) / ones({2}), Catch::Contains("[div]"));
    CHECK_THROWS_WITH(ones({3}) - ones({2}), Catch::Contains("[sub]"));
    CHECK_THROWS_AS(pow(ones({2}, kInt64), -1), ValueError);
    CHECK_THROWS_WITH(outer(ones({2, 3}), ones({4})),
                      Catch::Contains("[outer]") && Catch::Contains("(2,3)") && Catch::Contains("(4)"));
    CHECK_THROWS_AS(outer(ones({2}), scalar_tensor(1.0)), ShapeError);
}
