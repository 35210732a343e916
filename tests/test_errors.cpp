// Errors: every bad input reachable through the public API throws a typed
// ember::Error whose message starts with "[op]" and names the shapes, and
// nothing crashes on unusual but legal input (empty and 0-d tensors).
#include <catch2/catch.hpp>

#include <thread>

#include "check.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("error types form one hierarchy under ember::Error", "[errors]") {
    CHECK_THROWS_AS(ones({2}) + ones({3}), Error);
    CHECK_THROWS_AS(ones({2}).view({3}), std::runtime_error);
    try {
        matmul(ones({4, 8}), ones({16, 32}));
        FAIL("no exception");
    } catch (const ShapeError& e) {
        CHECK(std::string(e.what()) == "[matmul] inner dimensions differ: a is (4,8), b is (16,32)");
    }
    CHECK(shape_str({}) == "()");
    CHECK(shape_str({4, 8}) == "(4,8)");
}

TEST_CASE("messages start with the op's name in brackets", "[errors]") {
    // One bad call per op family; each message must name its op.
    // One case per line (clang-format would split the lambdas that hold braces).
    // clang-format off
    const std::vector<std::pair<std::string, std::function<void()>>> calls = {
        {"[add]", [] { add(ones({2}), ones({3})); }},
        {"[sum]", [] { sum(ones({2}), 1); }},
        {"[softmax]", [] { softmax(ones({2}), 3); }},
        {"[cross_entropy]", [] { cross_entropy(ones({2, 3}), tensor({5, 0})); }},
        {"[cat]", [] { cat({ones({2, 2}), ones({3})}); }},
        {"[view]", [] { ones({2, 3}).view({7}); }},
        {"[permute]", [] { ones({2, 3}).permute({1}); }},
        {"[expand]", [] { ones({2}).expand({3}); }},
        {"[index_select]", [] { index_select(ones({2}), 0, tensor({2})); }},
        {"[tril]", [] { tril(ones({2})); }},
        {"[masked_fill]", [] { masked_fill(ones({2}), ones({2}), 0); }},
        {"[dropout]", [] { dropout(ones({2}), 2.0); }},
        {"[backward]", [] { sum(ones({2})).backward(); }},
        {"[requires_grad_]", [] { ones({2}, kInt64).requires_grad_(); }},
        {"[empty]", [] { empty({-1}); }},
        {"[narrow]", [] { ones({2}).narrow(0, 1, 5); }},
    };
    // clang-format on
    for (const auto& [prefix, call] : calls) {
        DYNAMIC_SECTION(prefix) {
            try {
                call();
                FAIL("no exception for " << prefix);
            } catch (const Error& e) {
                CHECK(std::string(e.what()).rfind(prefix, 0) == 0);
            }
        }
    }
}

TEST_CASE("empty and 0-d tensors pass through every op family without crashing", "[errors]") {
    Tensor e = zeros({0, 3}).requires_grad_();
    Tensor s = tensor({2.0f}).view({}).detach().requires_grad_();
    CHECK(sum(e).item<float>() == 0.0f);
    CHECK(std::isnan(mean(e).item<float>()));
    CHECK((e * 2 + 1).shape() == Shape{0, 3});
    CHECK(softmax(e, -1).shape() == Shape{0, 3});
    CHECK(matmul(e, ones({3, 2})).shape() == Shape{0, 2});
    CHECK(matmul(ones({2, 0}), ones({0, 3})).shape() == Shape{2, 3});
    CHECK(cat({e, e}).shape() == Shape{0, 3});
    CHECK(e.t().contiguous().shape() == Shape{3, 0});
    CHECK(sum(e, 0).shape() == Shape{3});
    sum(e * 3).backward();
    CHECK(e.grad().shape() == Shape{0, 3});
    Tensor y = s * s + exp(s);
    CHECK(y.dim() == 0);
    y.backward();
    CHECK(s.grad().item<float>() == Approx(4.0 + std::exp(2.0)));
    CHECK(softmax(s, 0).item<float>() == 1.0f);
    CHECK(sum(s, 0).dim() == 0);
    CHECK(max(s).item<float>() == 2.0f);
}

TEST_CASE("set_num_threads refuses counts below 1 and above 4 per hardware thread", "[errors][threads]") {
    // 100,000 threads crashed inside libgomp and 200,000 overflowed the
    // stack; the limit is named in the message, and the setting is kept.
    const int before = get_num_threads();
    const unsigned hardware = std::thread::hardware_concurrency();
    CHECK(max_num_threads() == 4 * static_cast<int>(hardware == 0 ? 1 : hardware));
    const std::string limit = "between 1 and " + std::to_string(max_num_threads());
    for (int n : {0, -1, max_num_threads() + 1, 100000, 200000}) {
        INFO(n);
        CHECK_THROWS_WITH(set_num_threads(n), Catch::Contains("[set_num_threads]") && Catch::Contains(limit));
        CHECK_THROWS_AS(set_num_threads(n), ValueError);
        CHECK(get_num_threads() == before);
    }
    CHECK_NOTHROW(set_num_threads(max_num_threads())); // (without OpenMP the count stays 1)
    set_num_threads(before);
}

TEST_CASE("exceptions leave tensors as they were", "[errors]") {
    Tensor x = tensor({1.0f, 2.0f});
    CHECK_THROWS(x.add_(ones({3})));
    CHECK_THROWS(x.copy_(ones({4})));
    CHECK_THROWS(x.masked_fill_(ones({2}), 0));
    require_equal(x, tensor({1.0f, 2.0f}));
    CHECK(x.storage()->version() == 0);
}
