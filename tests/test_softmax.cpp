// softmax and log_softmax (core/softmax.cpp) against PyTorch, with gradient
// checks, stability for large logits, and fully masked rows.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

const std::vector<OpCase>& cases() {
    using V = const std::vector<Tensor>&;
    static const std::vector<OpCase> all = {
        {"softmax.last", [](V in) { return softmax(in[0], -1); }},
        {"softmax.dim0", [](V in) { return softmax(in[0], 0); }},
        {"softmax.middle", [](V in) { return in[0].softmax(1); }},
        {"softmax.large_logits", [](V in) { return softmax(in[0] * 100, -1); }},
        {"softmax.transposed", [](V in) { return softmax(in[0].t(), -1); }},
        {"softmax.float64", [](V in) { return softmax(in[0], -1); }},
        {"log_softmax.last", [](V in) { return log_softmax(in[0], -1); }},
        {"log_softmax.dim0", [](V in) { return log_softmax(in[0], 0); }},
        {"log_softmax.large_logits", [](V in) { return log_softmax(in[0] * 100, -1); }},
    };
    return all;
}

} // namespace

TEST_CASE("softmax and log_softmax match PyTorch's values and gradients", "[softmax]") { check_cases(fixtures("softmax"), cases()); }

TEST_CASE("softmax and log_softmax pass the finite-difference gradient check", "[softmax][gradcheck]") {
    check_cases_gradients(fixtures("softmax"), cases());
}

TEST_CASE("the averaging trick: softmax over a causal mask gives running means", "[softmax]") {
    // seed 002, version 3: wei = zeros.masked_fill(tril == 0, -inf); softmax(wei, 1)
    Tensor wei = zeros({3, 3}).masked_fill(tril(ones({3, 3})) == 0, -INFINITY);
    require_equal(wei, fixtures("softmax").tensor("averaging.in"));
    require_close(softmax(wei, 1), fixtures("softmax").tensor("averaging.out"));
}

TEST_CASE("a fully masked row gives NaN, as in PyTorch", "[softmax]") {
    require_close(softmax(full({2, 3}, -INFINITY), -1), fixtures("softmax").tensor("all_masked.out"));
}

TEST_CASE("softmax rejects bad dims and dtypes", "[softmax][errors]") {
    CHECK_THROWS_AS(softmax(ones({2, 3}), 2), IndexError);
    CHECK_THROWS_WITH(softmax(ones({2, 3}), 2), Catch::Contains("[softmax]"));
    CHECK_THROWS_AS(log_softmax(ones({2}, kInt64), 0), DTypeError);
}
