// cat, stack, chunk, split, tril, triu, index_select, repeat_interleave, embedding
// (core/ops/index.cpp, core/tensor/view.cpp) against PyTorch, with gradient checks.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

Tensor weighted_cat(const std::vector<Tensor>& pieces, int64_t dim) {
    // Scale piece i by i + 1 before joining, so a gradient routed to the
    // wrong piece shows up.
    std::vector<Tensor> scaled;
    for (size_t i = 0; i < pieces.size(); ++i) scaled.push_back(pieces[i] * static_cast<double>(i + 1));
    return cat(scaled, dim);
}

} // namespace

TEST_CASE("joining, splitting and picking match PyTorch's values and gradients", "[index]") {
    const Fixtures& f = fixtures("index");
    Tensor idx = f.tensor("index_select.idx");
    Tensor tok = f.tensor("embedding.idx");
    using V = const std::vector<Tensor>&;
    // One case per line (clang-format would split the lambdas that hold braces).
    // clang-format off
    const std::vector<std::pair<std::string, OpFn>> cases = {
        {"cat.dim0", [](V in) { return cat({in[0], in[1]}, 0); }},
        {"cat.last", [](V in) { return cat({in[0], in[1], in[2]}, -1); }},
        {"cat.mixed_dtype", [](V in) { return cat({in[0], in[1]}, 0); }},
        {"stack.0", [](V in) { return stack({in[0], in[1]}); }},
        {"stack.last", [](V in) { return stack({in[0], in[1]}, -1); }},
        {"chunk.3", [](V in) { return weighted_cat(in[0].chunk(3, -1), -1); }},
        {"split.sizes", [](V in) { return weighted_cat(split(in[0], Shape{1, 3, 2}, 0), 0); }},
        {"tril", [](V in) { return tril(in[0]); }},
        {"tril.k1", [](V in) { return in[0].tril(1); }},
        {"triu.k1", [](V in) { return triu(in[0], 1); }},
        {"triu.k_neg", [](V in) { return triu(in[0], -1); }},
        {"index_select.dim0", [idx](V in) { return index_select(in[0], 0, idx); }},
        {"index_select.dim1", [idx](V in) { return in[0].index_select(1, idx); }},
        {"embedding", [tok](V in) { return embedding(tok, in[0]); }},
        {"repeat_interleave.last", [](V in) { return in[0].repeat_interleave(2, -1); }},
        {"repeat_interleave.dim0", [](V in) { return repeat_interleave(in[0], 3, 0); }},
        {"repeat_interleave.flat", [](V in) { return in[0].repeat_interleave(2); }},
        {"repeat_interleave.zero", [](V in) { return repeat_interleave(in[0], 0, 1); }},
    };
    // clang-format on
    for (const auto& [name, op] : cases) {
        DYNAMIC_SECTION(name) {
            check_case(f, name, op);
            check_gradients(f, name, op);
        }
    }
}

TEST_CASE("chunk and split share storage with their input", "[index][views]") {
    Tensor x = arange(10);
    std::vector<Tensor> parts = x.chunk(3);
    REQUIRE(parts.size() == 3);
    CHECK(parts[0].numel() == 4);
    CHECK(parts[2].numel() == 2);
    parts[1].fill_(-1);
    require_equal(x, tensor({0, 1, 2, 3, -1, -1, -1, -1, 8, 9}));
    CHECK(split(x, 4).size() == 3);
    CHECK(chunk(arange(2), 5).size() == 2); // PyTorch may return fewer chunks
}

TEST_CASE("tril of ones is the averaging mask", "[index]") {
    require_equal(tril(ones({3, 3})), fixtures("index").tensor("tril.ones"));
}

TEST_CASE("joining and picking reject bad arguments", "[index][errors]") {
    CHECK_THROWS_WITH(cat({ones({2, 3}), ones({2, 4})}, 0),
                      Catch::Contains("[cat]") && Catch::Contains("(2,4)") && Catch::Contains("(2,3)"));
    CHECK_THROWS_AS(cat({}, 0), ValueError);
    CHECK_THROWS_AS(cat({ones({2}), ones({2})}, 1), IndexError);
    CHECK_THROWS_AS(stack({ones({2}), ones({3})}), ShapeError);
    CHECK_THROWS_AS(tril(ones({3})), ShapeError);
    CHECK_THROWS_AS(index_select(ones({3, 2}), 0, tensor({3})), IndexError);
    CHECK_THROWS_WITH(index_select(ones({3, 2}), 0, tensor({-1})),
                      Catch::Contains("[index_select]") && Catch::Contains("-1"));
    CHECK_THROWS_AS(index_select(ones({3, 2}), 0, tensor({0.0f})), DTypeError);
    CHECK_THROWS_WITH(embedding(tensor({5}), ones({5, 2})), Catch::Contains("[embedding]") && Catch::Contains("5"));
    CHECK_THROWS_AS(embedding(tensor({1.0f}), ones({5, 2})), DTypeError);
    CHECK_THROWS_AS(embedding(tensor({1}), ones({5})), ShapeError);
    CHECK_THROWS_AS(split(ones({6}), Shape{1, 2}), ShapeError);
    CHECK_THROWS_AS(ones({6}).chunk(0), ValueError);
    // Expanded views cost nothing, so their sizes along dim can add up past
    // INT64_MAX: refused before the sum overflows (32 x 2^59 would wrap to 0).
    std::vector<Tensor> huge(32, ones({1}).expand({int64_t{1} << 59}));
    CHECK_THROWS_WITH(cat(huge, 0), Catch::Contains("[cat]") && Catch::Contains("more than"));
    CHECK_THROWS_WITH(repeat_interleave(ones({2, 3}), -1),
                      Catch::Contains("[repeat_interleave]") && Catch::Contains("-1") && Catch::Contains("(2,3)"));
    CHECK_THROWS_AS(repeat_interleave(ones({2, 3}), 2, 2), IndexError);
    CHECK_THROWS_AS(repeat_interleave(scalar_tensor(1.0), 2, 0), IndexError);
    // 4 * (2^62 + 1) wrapped to 4 (UBSan: signed overflow), giving the input's shape back.
    const int64_t repeats = (int64_t{1} << 62) + 1;
    CHECK_THROWS_WITH(repeat_interleave(ones({4}), repeats), Catch::Contains("[repeat_interleave]") &&
                                                                 Catch::Contains("too many elements") &&
                                                                 Catch::Contains("(4)"));
    CHECK_THROWS_AS(repeat_interleave(ones({3, 4}), int64_t{1} << 61, 0), ValueError); // the product of all sizes
    CHECK(repeat_interleave(ones({0}), repeats).numel() == 0);
}

TEST_CASE("repeat_interleave repeats each entry in a row, and integers too", "[index]") {
    require_equal(repeat_interleave(tensor({3, 7}), 3), tensor({3, 3, 3, 7, 7, 7}));
    require_equal(scalar_tensor(2.5).repeat_interleave(2), tensor({2.5f, 2.5f})); // 0-d: flattened first
}

// Found by the differential fuzzer (tests/fuzz/regressions.txt, empty_embedding_dim):
// backward reshaped dout to (-1, C), which cannot infer -1 when C is 0.
TEST_CASE("embedding with embedding_dim 0 backpropagates, as PyTorch does", "[embedding][regression]") {
    Tensor weight = ones({3, 0}).requires_grad_();
    Tensor out = embedding(tensor({{0, 2}, {1, 1}}), weight);
    CHECK(out.shape() == Shape{2, 2, 0});
    out.sum().backward();
    REQUIRE(weight.grad().defined());
    CHECK(weight.grad().shape() == Shape{3, 0});
}
