// gradcheck (core/autograd/gradcheck.cpp) must pass correct gradients and catch wrong
// ones: off by a factor of two, transposed, or missing a term.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;

namespace {

// f(W, x) = W @ x with W square, so a transposed gradient has the right
// shape and only its values betray it. `mistake` selects the bug.
enum class Mistake { None, FactorTwo, Transposed, MissingTerm };

template <Mistake M>
struct Product : Function<Product<M>> {
    static Tensor forward(AutogradContext* ctx, const Tensor& w, const Tensor& x) {
        ctx->save_for_backward({w, x});
        return matmul(w, x) + w.sum();
    }
    static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
        auto saved = ctx->get_saved_variables();
        const Tensor& w = saved[0];
        const Tensor& x = saved[1];
        // out_i = sum_j W_ij x_j + sum_kl W_kl, so
        // dW_ij = dout_i x_j + sum_i dout_i and dx_j = sum_i W_ij dout_i.
        Tensor dw = matmul(dout.unsqueeze(1), x.unsqueeze(0));
        if (M != Mistake::MissingTerm) dw = dw + dout.sum();
        Tensor dx = M == Mistake::Transposed ? matmul(w, dout) : matmul(w.t(), dout);
        if (M == Mistake::FactorTwo) dx = dx * 2;
        return {dw, dx};
    }
};

std::vector<Tensor> inputs() {
    Tensor w = tensor({{1.0, 2.0, -1.0}, {0.5, -3.0, 2.0}, {4.0, 1.0, 0.25}}, kFloat64).requires_grad_();
    Tensor x = tensor({0.3, -1.2, 2.0}, kFloat64).requires_grad_();
    return {w, x};
}

template <Mistake M>
bool check(bool raise = false) {
    GradcheckOptions options;
    options.raise_exception = raise;
    return gradcheck([](const std::vector<Tensor>& in) { return Product<M>::apply(in[0], in[1]); }, inputs(), options);
}

} // namespace

TEST_CASE("gradcheck passes a correct gradient", "[gradcheck]") {
    CHECK(check<Mistake::None>(true));
    CHECK(gradcheck([](const std::vector<Tensor>& in) { return softmax(matmul(in[0], in[1]), 0); }, inputs()));
}

TEST_CASE("gradcheck catches a gradient off by a factor of two", "[gradcheck]") {
    CHECK_FALSE(check<Mistake::FactorTwo>());
    CHECK_THROWS_AS(check<Mistake::FactorTwo>(true), GradcheckError);
    CHECK_THROWS_WITH(check<Mistake::FactorTwo>(true),
                      Catch::Contains("input 1") && Catch::Contains("analytic") && Catch::Contains("numerical"));
}

TEST_CASE("gradcheck catches a transposed gradient", "[gradcheck]") { CHECK_FALSE(check<Mistake::Transposed>()); }

TEST_CASE("gradcheck catches a missing term", "[gradcheck]") {
    CHECK_FALSE(check<Mistake::MissingTerm>());
    CHECK_THROWS_WITH(check<Mistake::MissingTerm>(true), Catch::Contains("input 0"));
}

TEST_CASE("gradcheck leaves the caller's tensors alone", "[gradcheck]") {
    std::vector<Tensor> in = inputs();
    Tensor before = in[0].detach().clone();
    gradcheck([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, in);
    CHECK_FALSE(in[0].grad().defined());
    testing::require_equal(in[0].detach(), before);
}

TEST_CASE("gradcheck refuses inputs it cannot check reliably", "[gradcheck][errors]") {
    auto identity = [](const std::vector<Tensor>& v) { return v[0] * 1.0; };
    CHECK_THROWS_AS(gradcheck(identity, {ones({2}).requires_grad_()}), ValueError); // float32
    CHECK_THROWS_WITH(gradcheck(identity, {ones({2}, kFloat64)}), Catch::Contains("no input requires grad"));
    CHECK_THROWS_AS(gradcheck([](const std::vector<Tensor>&) { return ones({2}, kFloat64); },
                              {ones({2}, kFloat64).requires_grad_()}),
                    ValueError);
}

TEST_CASE("gradcheck checks parameters a function uses directly, and puts them back", "[gradcheck]") {
    std::vector<Tensor> in = inputs(); // w (3,3), x (3)
    Tensor w = in[0];
    Tensor before = w.detach().clone();
    w.set_grad(ones({3, 3}, kFloat64));
    auto with_captured = [&w](const std::vector<Tensor>& v) { return tanh(matmul(w, v[0])); };
    CHECK(gradcheck(with_captured, {in[1]}, {w}));
    testing::require_equal(w.detach(), before, "values restored");
    testing::require_equal(w.grad(), ones({3, 3}, kFloat64), ".grad restored");
    // A wrong gradient for the captured tensor is caught, and named as a parameter.
    auto broken = [&w](const std::vector<Tensor>& v) { return Product<Mistake::MissingTerm>::apply(w, v[0]); };
    CHECK_THROWS_WITH(gradcheck(broken, {in[1]}, {w}), Catch::Contains("parameter 0"));
    CHECK_THROWS_AS(gradcheck(with_captured, {in[1]}, {w * 2}), ValueError); // not a leaf
}
