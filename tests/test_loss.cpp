// cross_entropy and dropout (core/ops/cross_entropy.cpp, dropout.cpp): PyTorch's values and gradients,
// gradient checks, ignore_index, and errors. (Dropout's masks are tested
// against PyTorch's bits in test_random.cpp.)
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("cross_entropy matches PyTorch's values and gradients", "[loss]") {
    const Fixtures& f = fixtures("loss");
    OpFn ce = [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); };
    for (const char* name : {"ce.basic", "ce.ignore", "ce.single_row", "ce.float64", "ce.vocab65"}) {
        DYNAMIC_SECTION(name) {
            check_case(f, name, ce);
            check_gradients(f, name, ce);
        }
    }
    OpFn ce_large = [](const std::vector<Tensor>& in) { return cross_entropy(in[0] * 50, in[1]); };
    check_case(f, "ce.large_logits", ce_large);
    check_gradients(f, "ce.large_logits", ce_large);
    OpFn ce1 = [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1], 1); };
    check_case(f, "ce.ignore_custom", ce1);
    check_gradients(f, "ce.ignore_custom", ce1);
}

TEST_CASE("cross_entropy of all-ignored targets is NaN", "[loss]") {
    Tensor loss = cross_entropy(ones({2, 3}), tensor({-100, -100}));
    require_close(loss, fixtures("loss").tensor("ce.all_ignored"));
}

TEST_CASE("cross_entropy at uniform logits is ln(C)", "[loss]") {
    // The loss a model starts from: every class equally likely.
    Tensor loss = cross_entropy(zeros({4, 65}), tensor({0, 10, 20, 64}));
    CHECK(loss.item<double>() == Approx(std::log(65.0)).epsilon(1e-6));
}

TEST_CASE("cross_entropy rejects bad targets and shapes", "[loss][errors]") {
    CHECK_THROWS_AS(cross_entropy(ones({2, 3}), tensor({0, 3})), IndexError);
    CHECK_THROWS_WITH(cross_entropy(ones({2, 3}), tensor({0, 3})),
                      Catch::Contains("[cross_entropy]") && Catch::Contains("target 3") && Catch::Contains("(2,3)"));
    CHECK_THROWS_AS(cross_entropy(ones({2, 3}), tensor({0, -1})), IndexError);
    CHECK_THROWS_AS(cross_entropy(ones({2, 3}), tensor({0.0f, 1.0f})), DTypeError);
    CHECK_THROWS_WITH(cross_entropy(ones({2, 3}), tensor({0, 1, 2})),
                      Catch::Contains("(3)") && Catch::Contains("(2,3)"));
    CHECK_THROWS_AS(cross_entropy(ones({2, 3, 4}), tensor({0, 1})), ShapeError);
    CHECK_THROWS_AS(cross_entropy(ones({2, 3}, kInt64), tensor({0, 1})), DTypeError);
}

TEST_CASE("dropout is the identity when not training or when p is 0", "[loss][dropout]") {
    Tensor x = tensor({1.0f, -2.0f, 3.0f});
    CHECK(dropout(x, 0.5, false).is_same(x));
    CHECK(dropout(x, 0.0, true).is_same(x));
    require_equal(dropout(x, 1.0, true), tensor({0.0f, -0.0f, 0.0f}));
}

TEST_CASE("dropout rejects probabilities outside [0, 1]", "[loss][dropout][errors]") {
    CHECK_THROWS_AS(dropout(ones({2}), 1.5), ValueError);
    CHECK_THROWS_WITH(dropout(ones({2}), -0.1), Catch::Contains("[dropout]"));
    CHECK_THROWS_AS(dropout(ones({2}, kInt64), 0.5), DTypeError);
}
