// Factories (core/tensor/factory.cpp): values and dtypes as PyTorch makes them,
// nested literals, options, and errors.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("zeros, ones, empty and full make what they say", "[factory]") {
    Tensor z = zeros({2, 3});
    CHECK(z.shape() == Shape{2, 3});
    CHECK(z.dtype() == kFloat32);
    CHECK(z.is_contiguous());
    CHECK(sum(z).item<float>() == 0.0f);
    CHECK(sum(ones({4}, kInt64)).item<int64_t>() == 4);
    CHECK(empty({0, 5}).numel() == 0);
    CHECK(zeros({}).dim() == 0);
    CHECK(zeros({}).numel() == 1);
    require_equal(full({2, 2}, 7), fixtures("factory").tensor("full.int"), "full infers int64 from 7");
    require_equal(full({2}, 0.1), fixtures("factory").tensor("full.float"), "full infers float32 from 0.1");
    require_equal(full({2}, true), fixtures("factory").tensor("full.bool"), "full infers bool from true");
    CHECK(full({2}, 7, kFloat64).dtype() == kFloat64);
}

TEST_CASE("arange and eye match PyTorch", "[factory]") {
    const Fixtures& f = fixtures("factory");
    require_equal(arange(5), f.tensor("arange.5"));
    require_equal(arange(0, 1, 0.1), f.tensor("arange.float_step"));
    require_equal(arange(2.5, -1, -0.75), f.tensor("arange.negative_step"));
    require_equal(arange(-3, 10, 4), f.tensor("arange.int_step"));
    require_equal(arange(5.5), f.tensor("arange.float_end"));
    require_equal(eye(3), f.tensor("eye.3"));
    require_equal(eye(2, 4), f.tensor("eye.2x4"));
}

TEST_CASE("tensor() reads nested braces and infers PyTorch's dtypes", "[factory]") {
    require_equal(tensor({{{1.5, 2.0}, {3.0, 4.0}}, {{5.0, 6.0}, {7.0, 8.25}}}),
                  fixtures("factory").tensor("tensor.nested"));
    require_equal(tensor({0.1, 1e-8, 3.4e38}), fixtures("factory").tensor("tensor.double_literal"));
    CHECK(tensor({1, 2}).dtype() == kInt64);
    CHECK(tensor({1.0f}).dtype() == kFloat32);
    CHECK(tensor({1.0}).dtype() == kFloat32); // PyTorch's default dtype, not double
    CHECK(tensor({true}).dtype() == kBool);
    CHECK(tensor({1, 2}, kFloat64).dtype() == kFloat64);
    CHECK(tensor({{1, 2}, {3, 4}}).shape() == Shape{2, 2});
    CHECK_THROWS_AS(tensor({{1, 2}, {3}}), ShapeError);
    CHECK_THROWS_WITH(tensor({{1, 2}, {3}}), Catch::Contains("[tensor]") && Catch::Contains("ragged"));
    require_equal(from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}),
                  tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}));
    CHECK_THROWS_AS(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), ShapeError);
}

TEST_CASE("*_like factories copy shape and dtype, and options set requires_grad", "[factory]") {
    Tensor x = ones({2, 3}, kFloat64);
    CHECK(zeros_like(x).dtype() == kFloat64);
    CHECK(ones_like(x).shape() == Shape{2, 3});
    CHECK(full_like(x, 2.5).dtype() == kFloat64);
    CHECK(sum(full_like(x, 2.5)).item<double>() == 15.0);
    CHECK(empty_like(x, kInt64).dtype() == kInt64);
    Tensor p = zeros({3}, TensorOptions().dtype(kFloat64).requires_grad(true));
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
    CHECK(p.dtype() == kFloat64);
}

TEST_CASE("conversions between dtypes round as PyTorch does", "[factory]") {
    const Fixtures& f = fixtures("factory");
    require_equal(tensor({1.7, -1.7, 0.5, -0.5, 1e10}).to(kInt64), f.tensor("to.float_to_int"), "truncation");
    require_equal(tensor({0, 3, -1}).to(kBool), f.tensor("to.int_to_bool"));
    require_equal(tensor({0.1, 1e-50, 1e300}, kFloat64).to(kFloat32), f.tensor("to.double_to_float"));
    // NaN and out-of-range floats become the int64 minimum (x86 conversion), never undefined behaviour.
    CHECK(tensor({NAN}).to(kInt64).item<int64_t>() == INT64_MIN);
    CHECK(tensor({1e30f}).to(kInt64).item<int64_t>() == INT64_MIN);
}

TEST_CASE("a number an int64 cannot hold is refused when written, as PyTorch refuses it", "[factory][errors]") {
    // PyTorch 1.13: torch.full((2,), nan, dtype=torch.long), t.fill_(nan),
    // t.masked_fill(m, nan) raise "value cannot be converted to type int64_t
    // without overflow" (and so for inf and 1e30), while 2.5 truncates to 2.
    // Before, ember wrote INT64_MIN silently.
    Tensor t = zeros({2}, kInt64);
    Tensor mask = tensor({true, false});
    for (double bad : {double(NAN), double(INFINITY), -double(INFINITY), 1e30}) {
        INFO(bad);
        CHECK_THROWS_WITH(full({2}, bad, kInt64), Catch::Contains("[full]") && Catch::Contains("int64") &&
                                                      Catch::Contains("without overflow") && Catch::Contains("(2)"));
        CHECK_THROWS_WITH(t.fill_(bad), Catch::Contains("[fill_]") && Catch::Contains("without overflow"));
        CHECK_THROWS_WITH(t.masked_fill(mask, bad), Catch::Contains("[masked_fill]"));
        CHECK_THROWS_AS(t.masked_fill_(mask, bad), ValueError);
    }
    require_equal(t, zeros({2}, kInt64), "left as it was");
    require_equal(full({2}, 2.5, kInt64), tensor({2, 2}));
    require_equal(t.masked_fill(mask, -2.5), tensor({-2, 0}));
    CHECK(full({1}, NAN, kBool).item<bool>()); // bool holds any number: nonzero is true
}

TEST_CASE("factories reject bad sizes and arguments", "[factory][errors]") {
    CHECK_THROWS_AS(zeros({2, -1}), ValueError);
    CHECK_THROWS_WITH(ones({-3}), Catch::Contains("[ones]") && Catch::Contains("(-3)"));
    CHECK_THROWS_AS(empty({int64_t{1} << 40, int64_t{1} << 40}), ValueError);
    CHECK_THROWS_AS(arange(0, 1, 0), ValueError);
    CHECK_THROWS_AS(arange(0, 10, -1), ValueError);
    CHECK_THROWS_AS(arange(0, INFINITY), ValueError);
    CHECK_THROWS_AS(eye(-1), ValueError);
    // Element counts whose byte size would overflow are refused, not wrapped.
    CHECK_THROWS_AS(zeros({int64_t{1} << 61}, kFloat64), ValueError);
    CHECK_THROWS_AS(empty({int64_t{1} << 62}), ValueError);
    CHECK(empty({int64_t{1} << 40, 0}).numel() == 0);
    CHECK_THROWS_AS(empty({0, int64_t{1} << 40, int64_t{1} << 40}), ValueError); // strides would overflow
    CHECK_THROWS_AS(arange(0, 10, NAN), ValueError);
    require_equal(arange(INT64_MAX - 2, INT64_MAX), tensor({INT64_MAX - 2, INT64_MAX - 1}));
}
