// Views (core/tensor/view.cpp): shared storage, strides, PyTorch's view/reshape
// rules, negative dims, indexing, and gradients through every view.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("views share storage: a write through a view is seen by its base", "[views]") {
    Tensor base = zeros({3, 4});
    Tensor col = base.select(1, 2);
    col.fill_(7);
    CHECK(base.index({1, 2}).item<float>() == 7.0f);
    base.t()[3].fill_(1); // column 3 through a transposed view
    require_equal(base, tensor({{0.f, 0.f, 7.f, 1.f}, {0.f, 0.f, 7.f, 1.f}, {0.f, 0.f, 7.f, 1.f}}));
    Tensor flat = base.view({12});
    flat.narrow(0, 0, 2).fill_(5);
    CHECK(base.index({0, 1}).item<float>() == 5.0f);
    CHECK(flat.storage() == base.storage());
}

TEST_CASE("views compute PyTorch's shapes and strides", "[views]") {
    Tensor x = zeros({2, 3, 4});
    CHECK(x.strides() == Shape{12, 4, 1});
    Tensor t = x.transpose(0, 2);
    CHECK(t.shape() == Shape{4, 3, 2});
    CHECK(t.strides() == Shape{1, 4, 12});
    CHECK_FALSE(t.is_contiguous());
    CHECK(t.contiguous().is_contiguous());
    CHECK(x.permute({2, 0, 1}).strides() == Shape{1, 12, 4});
    CHECK(x.unsqueeze(1).shape() == Shape{2, 1, 3, 4});
    CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
    CHECK(x.unsqueeze(0).squeeze().shape() == Shape{2, 3, 4});
    CHECK(zeros({1, 3, 1}).squeeze(-1).shape() == Shape{1, 3});
    CHECK(zeros({1, 3, 1}).squeeze(1).shape() == Shape{1, 3, 1});
    Tensor s = x.slice(2, 1, None, 2);
    CHECK(s.shape() == Shape{2, 3, 2});
    CHECK(s.strides() == Shape{12, 4, 2});
    CHECK(s.storage_offset() == 1);
    CHECK(x.slice(1, -2).shape() == Shape{2, 2, 4});
    CHECK(x.slice(1, 5, 9).shape() == Shape{2, 0, 4}); // clamped, as Python slicing
    CHECK(x.index({Slice(), 1, Slice(None, 2)}).shape() == Shape{2, 2});
    CHECK(x.index({-1}).storage_offset() == 12);
    CHECK(zeros({3, 1}).expand({2, 3, 4}).strides() == Shape{0, 1, 0});
    CHECK(zeros({3, 1}).expand({-1, 5}).shape() == Shape{3, 5});
    CHECK(x.view({-1, 4}).shape() == Shape{6, 4});
    CHECK(x.flatten().shape() == Shape{24});
    CHECK(x.flatten(1).shape() == Shape{2, 12});
}

TEST_CASE("view refuses what its strides forbid; reshape copies instead", "[views]") {
    Tensor x = arange(12).view({3, 4});
    Tensor t = x.t(); // (4,3) with strides (1,4)
    CHECK_THROWS_AS(t.view({12}), ShapeError);
    CHECK_THROWS_WITH(t.view({12}), Catch::Contains("[view]") && Catch::Contains("reshape"));
    Tensor r = t.reshape({12});
    CHECK(r.storage() != x.storage());
    require_equal(r, tensor({0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
    // Heads split off by view and transpose: (2,3,5,2) with strides (30,2,6,1).
    // Splitting a dim or adding a 1 is a view; merging the non-adjacent
    // (5,2) is not; transposing back makes it contiguous again.
    Tensor heads = zeros({2, 5, 6}).view({2, 5, 3, 2}).transpose(1, 2);
    CHECK(heads.view({2, 3, 5, 1, 2}).storage() == heads.storage());
    CHECK_THROWS_AS(heads.view({2, 3, 10}), ShapeError);
    CHECK(heads.transpose(1, 2).view({2, 5, 6}).storage() == heads.storage());
    CHECK(x.reshape({2, 6}).storage() == x.storage()); // reshape views when it can
}

TEST_CASE("gradients flow back through every view as in PyTorch", "[views]") {
    using V = const std::vector<Tensor>&;
    // One case per line (clang-format would split the lambdas that hold braces).
    // clang-format off
    const std::vector<std::pair<std::string, OpFn>> cases = {
        {"view", [](V in) { return in[0].view({3, 4}) * arange(12.0).view({3, 4}); }},
        {"reshape.copy", [](V in) { return in[0].t().reshape({-1}) * arange(12.0); }},
        {"transpose", [](V in) { return in[0].transpose(0, 2) * arange(24.0).view({4, 3, 2}); }},
        {"permute", [](V in) { return in[0].permute({2, 0, 1}) * arange(24.0).view({4, 2, 3}); }},
        {"unsqueeze_squeeze", [](V in) { return in[0].unsqueeze(1).squeeze() * 2; }},
        {"slice", [](V in) { return in[0].index({Slice(), Slice(1, 4, 2)}) * 3; }},
        {"select", [](V in) { return in[0][1] * arange(4.0); }},
        {"narrow", [](V in) { return in[0].narrow(1, 1, 2) * tensor({1.0f, 2.0f}); }},
        {"expand", [](V in) { return in[0].expand({2, 3, 4}) * arange(24.0).view({2, 3, 4}); }},
        {"flatten", [](V in) { return in[0].flatten(1) * arange(12.0); }},
        {"head_split", [](V in) { return in[0].view({2, 3, 2, 2}).transpose(1, 2).contiguous().view({2, 2, 6}) * 1.5; }},
    };
    // clang-format on
    for (const auto& [name, op] : cases) {
        DYNAMIC_SECTION(name) {
            check_case(fixtures("views"), name, op);
            check_gradients(fixtures("views"), name, op);
        }
    }
}

TEST_CASE("views reject bad dims, sizes and indices", "[views][errors]") {
    Tensor x = zeros({2, 3});
    CHECK_THROWS_AS(x.view({4}), ShapeError);
    CHECK_THROWS_WITH(x.view({4}), Catch::Contains("[view]") && Catch::Contains("(2,3)"));
    CHECK_THROWS_AS(x.view({-1, -1}), ValueError);
    CHECK_THROWS_AS(x.reshape({-1, 4}), ShapeError);
    CHECK_THROWS_AS(x.transpose(0, 2), IndexError);
    CHECK_THROWS_WITH(x.transpose(0, -3), Catch::Contains("[transpose]") && Catch::Contains("-3"));
    CHECK_THROWS_AS(x.permute({0}), ShapeError);
    CHECK_THROWS_AS(x.permute({0, 0}), ValueError);
    CHECK_THROWS_AS(x.unsqueeze(3), IndexError);
    CHECK_THROWS_AS(x.select(1, 3), IndexError);
    CHECK_THROWS_WITH(x.select(0, -3), Catch::Contains("[select]") && Catch::Contains("-3"));
    CHECK_THROWS_AS(x.narrow(1, 2, 2), IndexError);
    CHECK_THROWS_AS(x.slice(0, 0, 2, 0), ValueError);
    CHECK_THROWS_AS(x.index({0, 0, 0}), IndexError);
    CHECK_THROWS_AS(x.expand({3, 3}), ShapeError);
    CHECK_THROWS_AS(x.expand({3}), ShapeError);
    CHECK_THROWS_AS(zeros({3, 4, 5}).t(), ShapeError);
    CHECK_THROWS_AS(x[5], IndexError);
    CHECK_THROWS_AS(zeros({}).select(0, 0), IndexError);
    // Sizes near INT64_MAX: clear errors or correct shapes, never overflow.
    CHECK(zeros({5}).slice(0, 0, None, INT64_MAX).shape() == Shape{1});
    CHECK_THROWS_AS(zeros({5}).narrow(0, 1, INT64_MAX), IndexError);
    CHECK(zeros({5}).chunk(INT64_MAX).size() == 5);
    CHECK_THROWS_AS(zeros({12}).split(Shape{INT64_MAX, INT64_MAX, 12}), ShapeError);
    CHECK_THROWS_AS(ones({1}).expand({int64_t{1} << 32, int64_t{1} << 32}), ValueError);
    // A tensor with no elements may take any zero-sized shape, but not one
    // whose other sizes multiply past 2^60 (their product would overflow).
    CHECK(zeros({0}).view({1 << 20, 0, 1 << 20}).shape() == Shape{1 << 20, 0, 1 << 20});
    CHECK_THROWS_WITH(zeros({0}).view({int64_t{1} << 40, int64_t{1} << 40, 0}),
                      Catch::Contains("[view]") && Catch::Contains("too many elements"));
    CHECK_THROWS_AS(zeros({0}).reshape({int64_t{1} << 62, 4, -1}), ValueError);
}
