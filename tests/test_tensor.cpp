// The Tensor handle (core/tensor/tensor.h, core/tensor/tensor.cpp): metadata, element
// access, handle semantics, copies and in-place writes.
#include <catch2/catch.hpp>

#include "check.h"
#include "core/loops/iter.h"
#include "core/tensor/shape.h"

#include <array>

using namespace ember;
using namespace ember::testing;
using ember::internal::for_each_run;
using ember::internal::StridedLayout;

TEST_CASE("a tensor knows its shape, strides, dtype and size", "[tensor]") {
    Tensor x = zeros({2, 3, 4}, kFloat64);
    CHECK(x.dim() == 3);
    CHECK(x.numel() == 24);
    CHECK(x.size(-1) == 4);
    CHECK(x.stride(0) == 12);
    CHECK(x.dtype() == kFloat64);
    CHECK(x.is_floating_point());
    CHECK(x.storage()->nbytes() == 24 * sizeof(double));
    CHECK(x.storage_offset() == 0);
    CHECK(element_size(kInt64) == 8);
    CHECK(std::string(dtype_name(kBool)) == "bool");
    CHECK(promote_types(kInt64, kFloat32) == kFloat32);
    CHECK(promote_types(kFloat32, kFloat64) == kFloat64);
}

TEST_CASE("copying a Tensor copies the handle, clone copies the data", "[tensor]") {
    Tensor a = zeros({3});
    Tensor b = a; // same tensor
    b.fill_(1);
    CHECK(a.is_same(b));
    CHECK(sum(a).item<float>() == 3.0f);
    Tensor c = a.clone();
    c.fill_(5);
    CHECK(sum(a).item<float>() == 3.0f);
    CHECK_FALSE(c.is_same(a));
    CHECK(c.storage() != a.storage());
}

TEST_CASE("item and data_ptr check what they are asked for", "[tensor]") {
    Tensor x = tensor({2.5f});
    CHECK(x.item<float>() == 2.5f);
    CHECK(x.item() == 2.5);
    CHECK(x.item<int64_t>() == 2);
    CHECK(tensor({{1, 2}, {3, 4}}).index({1, 0}).item<int64_t>() == 3);
    CHECK_THROWS_AS(ones({2}).item(), ValueError);
    CHECK_THROWS_WITH(ones({2}).item(), Catch::Contains("[item]") && Catch::Contains("(2)"));
    CHECK_THROWS_AS(ones({2}).data_ptr<double>(), DTypeError);
    Tensor s = arange(10).slice(0, 3);
    CHECK(*s.data_ptr<int64_t>() == 3); // data_ptr points at the view's first element
}

TEST_CASE("copy_ broadcasts and converts; fill_ and zero_ write every element", "[tensor]") {
    Tensor dst = zeros({2, 3});
    dst.copy_(tensor({1, 2, 3}));
    require_equal(dst, tensor({{1.f, 2.f, 3.f}, {1.f, 2.f, 3.f}}));
    dst.t().fill_(4); // through a view
    CHECK(sum(dst).item<float>() == 24.0f);
    dst.zero_();
    CHECK(sum(dst).item<float>() == 0.0f);
    CHECK_THROWS_AS(dst.copy_(ones({3, 3})), ShapeError);
    Tensor i = zeros({2}, kInt64);
    i.fill_(2.7); // converted as PyTorch does
    CHECK(sum(i).item<int64_t>() == 4);
}

TEST_CASE("copy_ from an overlapping source reads it before writing", "[tensor]") {
    Tensor a = arange(9.0).view({3, 3});
    a.copy_(a.t());
    require_equal(a, tensor({{0.f, 3.f, 6.f}, {1.f, 4.f, 7.f}, {2.f, 5.f, 8.f}}));
    CHECK_THROWS_AS(zeros({1}).expand({100000}).copy_(arange(100000.0)), ValueError);
    CHECK_THROWS_AS(zeros({1}).expand({3}).fill_(1), ValueError);
    CHECK(std::isnan(tensor({NAN}).item<double>()));
    CHECK(tensor({NAN}).item<int64_t>() == INT64_MIN);
}

TEST_CASE("in-place writes bump the storage version that autograd checks", "[tensor]") {
    Tensor x = zeros({2});
    uint64_t v0 = x.storage()->version();
    x.add_(1);
    x[0].fill_(3); // a view shares the counter
    CHECK(x.storage()->version() == v0 + 2);
    Tensor y = x.clone();
    CHECK(y.storage()->version() == 0);
}

TEST_CASE("a transposed copy (tiled) puts every element where the strides say", "[tensor]") {
    // Shapes that are and are not multiples of the 32-element tile, a view
    // with an offset, and a conversion on the way.
    for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {32, 64}, {70, 45}, {3, 100}}) {
        INFO(rows << "x" << cols);
        Tensor base = arange((rows + 1) * cols).to(kFloat32).view({rows + 1, cols});
        Tensor src = base.slice(0, 1).t(); // (cols, rows), strides (1, cols), offset cols
        for (DType dtype : {kFloat32, kFloat64}) {
            Tensor out = src.to(dtype).contiguous();
            REQUIRE(out.is_contiguous());
            bool all = true;
            for (int64_t i = 0; i < cols; ++i)
                for (int64_t j = 0; j < rows; ++j)
                    all = all && out[i][j].item<double>() == static_cast<double>((j + 1) * cols + i);
            CHECK(all);
        }
    }
}

TEST_CASE("contiguity follows PyTorch's definition", "[tensor]") {
    CHECK(zeros({2, 3}).is_contiguous());
    CHECK_FALSE(zeros({2, 3}).t().is_contiguous());
    CHECK(zeros({1, 3}).t().is_contiguous()); // size-1 dims do not count
    CHECK(zeros({3, 1}).expand({3, 1}).is_contiguous());
    CHECK_FALSE(zeros({3, 1}).expand({3, 4}).is_contiguous());
    CHECK(zeros({0, 3}).t().is_contiguous());
    Tensor t = arange(6).view({2, 3}).t();
    Tensor c = t.contiguous();
    CHECK(c.is_contiguous());
    require_equal(c, tensor({{0, 3}, {1, 4}, {2, 5}}));
    CHECK(c.contiguous().is_same(c));
}

TEST_CASE("threads can be set and the setting is checked", "[tensor][parallel]") {
    int n = get_num_threads();
    CHECK(n >= 1);
    set_num_threads(1);
    CHECK(get_num_threads() == 1);
    set_num_threads(n);
    CHECK_THROWS_AS(set_num_threads(0), ValueError);
}

TEST_CASE("for_each_run visits each element once, in row-major order, from any start", "[tensor][iter]") {
    // Every kernel walks its operands with for_each_run (core/loops/iter.h), each
    // thread from its own start. Expanding the runs it reports must give, for
    // every linear index in [begin, end), the offsets that index's
    // multi-index has in each operand: the definition of strides.
    struct Layout {
        Shape shape, out_strides, in_strides;
    };
    const std::vector<Layout> layouts = {
        {{3, 4, 5}, {20, 5, 1}, {1, 3, 12}},              // a transposed input
        {{2, 8, 4, 8}, {256, 32, 8, 1}, {256, 8, 64, 1}}, // attention's head merge
        {{2, 1, 3, 4}, {12, 12, 4, 1}, {0, 0, 4, 1}},     // broadcast leading dims
        {{5, 6}, {6, 1}, {6, 1}},                         // contiguous: one run
        {{4, 3, 2}, {6, 2, 1}, {1, 8, 4}},                // no dim merges
        {{7}, {1}, {2}},                                  // 1-D, strided
    };
    uint32_t seed = 7;
    for (const Layout& l : layouts) {
        const int64_t numel = shape_numel(l.shape), nd = static_cast<int64_t>(l.shape.size());
        StridedLayout<2> layout(l.shape, {&l.out_strides, &l.in_strides});
        std::vector<std::pair<int64_t, int64_t>> ranges = {{0, numel}, {1, numel}, {0, numel - 1}};
        for (int i = 0; i < 20; ++i) {
            seed = seed * 1664525u + 1013904223u;
            int64_t a = (seed >> 8) % (numel + 1);
            seed = seed * 1664525u + 1013904223u;
            int64_t b = (seed >> 8) % (numel + 1);
            ranges.push_back({std::min(a, b), std::max(a, b)});
        }
        for (auto [begin, end] : ranges) {
            std::vector<std::array<int64_t, 2>> seen;
            for_each_run(layout, begin, end, [&](const auto& off, const auto& step, int64_t n) {
                for (int64_t i = 0; i < n; ++i) seen.push_back({off[0] + i * step[0], off[1] + i * step[1]});
            });
            REQUIRE(static_cast<int64_t>(seen.size()) == end - begin);
            for (int64_t idx = begin; idx < end; ++idx) {
                int64_t rest = idx, out = 0, in = 0;
                for (int64_t d = nd - 1; d >= 0; --d) {
                    const int64_t i = rest % l.shape[d];
                    rest /= l.shape[d];
                    out += i * l.out_strides[d];
                    in += i * l.in_strides[d];
                }
                INFO("layout " << &l - layouts.data() << ", range [" << begin << ", " << end << "), index " << idx);
                REQUIRE(seen[idx - begin] == std::array<int64_t, 2>{out, in});
            }
        }
    }
}
