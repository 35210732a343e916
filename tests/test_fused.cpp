// The fused primitives with a hand-written backward (softmax, log_softmax,
// layer_norm, cross_entropy) against the same function composed of ember's
// elementary ops, whose backward autograd derives: values and every
// gradient. The fused op sums in another order and rounds fewer times, so
// the two agree within rounding: 1e-12 relative in float64 (the check of the
// math), 1e-5 in float32. (scaled_masked_softmax and linear promise the bits
// of the ops they fuse: tests/test_softmax.cpp, tests/test_matmul.cpp.)
#include <cmath>
#include <functional>

#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs fused and composed on leaves with the same values, backpropagates
// the same dout through both, and compares the outputs and the gradients.
void compare(const std::string& what, const std::vector<Tensor>& inputs, const Fn& fused, const Fn& composed) {
    std::vector<Tensor> grads[2], outs(2);
    for (int i = 0; i < 2; ++i) {
        std::vector<Tensor> leaves;
        for (const Tensor& t : inputs)
            leaves.push_back(t.is_floating_point() ? t.detach().clone().requires_grad_() : t);
        outs[i] = (i == 0 ? fused : composed)(leaves);
        manual_seed(99);
        outs[i].backward(randn(outs[i].shape(), outs[i].dtype()));
        for (const Tensor& t : leaves)
            if (t.is_floating_point()) grads[i].push_back(t.grad());
    }
    const double rtol = inputs[0].dtype() == kFloat64 ? 1e-12 : 1e-5;
    const Tolerance tol{rtol, rtol};
    require_close(outs[0], outs[1], tol, what + ": output");
    for (size_t g = 0; g < grads[0].size(); ++g)
        require_close(grads[0][g], grads[1][g], tol, what + ": gradient of input " + std::to_string(g));
}

// e^(x - m) / sum e^(x - m) along dim, m the row's max taken as a constant
// (any m gives the same function; subtracting it keeps e^ finite).
Tensor composed_softmax(const Tensor& x, int64_t dim) {
    Tensor e = exp(x - max(x.detach(), dim, true).values);
    return e / sum(e, dim, true);
}

// x - m - log sum e^(x - m) along dim.
Tensor composed_log_softmax(const Tensor& x, int64_t dim) {
    Tensor shifted = x - max(x.detach(), dim, true).values;
    return shifted - log(sum(exp(shifted), dim, true));
}

} // namespace

TEST_CASE("softmax and log_softmax equal their composition of elementary ops", "[fused][softmax]") {
    for (DType dtype : {kFloat64, kFloat32})
        for (int64_t dim : {-1, 0, 1}) {
            manual_seed(1);
            Tensor x = randn({5, 7, 9}, dtype) * 3;
            const std::string where = std::string(dtype_name(dtype)) + " dim " + std::to_string(dim);
            compare(
                "softmax " + where, {x}, [&](const auto& in) { return softmax(in[0], dim); },
                [&](const auto& in) { return composed_softmax(in[0], dim); });
            compare(
                "log_softmax " + where, {x}, [&](const auto& in) { return log_softmax(in[0], dim); },
                [&](const auto& in) { return composed_log_softmax(in[0], dim); });
        }
}

TEST_CASE("layer_norm equals its composition of elementary ops", "[fused][layer_norm]") {
    // (x - mean) / sqrt(var + eps) * weight + bias, the biased variance, over
    // the last dim and over the last two.
    for (DType dtype : {kFloat64, kFloat32})
        for (Shape normalized : {Shape{16}, Shape{4, 16}}) {
            manual_seed(2);
            Tensor x = randn({3, 4, 16}, dtype) * 2 + 1;
            Tensor w = randn(normalized, dtype), b = randn(normalized, dtype);
            Shape dims;
            for (size_t d = 0; d < normalized.size(); ++d) dims.push_back(-1 - static_cast<int64_t>(d));
            compare(
                std::string("layer_norm ") + dtype_name(dtype) + " over " + shape_str(normalized), {x, w, b},
                [&](const auto& in) { return layer_norm(in[0], normalized, in[1], in[2]); },
                [&](const auto& in) {
                    Tensor centered = in[0] - mean(in[0], dims, true);
                    Tensor var = mean(centered * centered, dims, true);
                    return centered / sqrt(var + 1e-5) * in[1] + in[2];
                });
        }
}

TEST_CASE("cross_entropy equals its composition of elementary ops", "[fused][loss]") {
    // mean over the counted rows of -log_softmax(logits)[target]: the picked
    // entry by a one-hot product, ignored rows (ignore_index) left out.
    for (DType dtype : {kFloat64, kFloat32}) {
        manual_seed(3);
        const int64_t n = 12, c = 10;
        Tensor logits = randn({n, c}, dtype) * 3;
        Tensor targets = randint(0, c, {n});
        targets.index({Slice(0, n, 5)}).fill_(-100);
        compare(
            std::string("cross_entropy ") + dtype_name(dtype), {logits, targets},
            [&](const auto& in) { return cross_entropy(in[0], in[1]); },
            [&](const auto& in) {
                Tensor counted = (in[1] != -100).to(dtype);
                Tensor one_hot = (arange(c).unsqueeze(0) == in[1].unsqueeze(1)).to(dtype);
                Tensor picked = sum(composed_log_softmax(in[0], -1) * one_hot, 1);
                return -sum(picked * counted) / sum(counted);
            });
    }
}
