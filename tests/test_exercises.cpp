// The reference solutions of docs/exercises.md (examples/exercises/) say
// what they find: this test runs each one, as a learner would, reads the
// numbers it prints ("label: v1 v2 ...") and checks each claim against the
// math, worked out here independently, or against PyTorch running the same
// lines (tests/fixtures/fx_exercises.py), so the answers stay true as ember
// changes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "check.h"
#include "process.h"

using namespace ember;
using namespace ember::testing;

namespace {

// The program's output (stdout and stderr); it must exit with status 0.
// On one thread: the programs are tiny, so more threads only wait for each
// other (on a busy machine, a hundred times as long), and ember's results
// do not depend on the thread count.
std::string run(const std::string& name) {
    CommandResult r = run_command("OMP_NUM_THREADS=1 " + std::string(EMBER_EXERCISES_DIR) + "/" + name + " 2>&1");
    INFO(name << " printed:\n" << r.out);
    REQUIRE(r.status == 0);
    return r.out;
}

// The numbers on the line "label: v1 v2 ...".
std::vector<double> values(const std::string& out, const std::string& label) {
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind(label + ":", 0) != 0) continue;
        std::vector<double> result;
        const char* p = line.c_str() + label.size() + 1;
        for (char* end;; p = end) {
            double v = std::strtod(p, &end); // reads "nan", "-nan" and "inf" too
            if (end == p) break;
            result.push_back(v);
        }
        return result;
    }
    FAIL("no line \"" << label << ":\" in the output:\n" << out);
    return {};
}

double value(const std::string& out, const std::string& label) {
    std::vector<double> v = values(out, label);
    REQUIRE(v.size() == 1);
    return v[0];
}

// The numbers on a line, compared with a tensor (float64, same element count).
void require_values(const std::string& out, const std::string& label, const Tensor& expected, Tolerance tol) {
    std::vector<double> got = values(out, label);
    REQUIRE(static_cast<int64_t>(got.size()) == expected.numel());
    require_close(from_vector(got, expected.shape(), kFloat64), expected.to(kFloat64), tol, label);
}

void require_values(const std::string& out, const std::string& label, const std::vector<double>& expected,
                    Tolerance tol) {
    require_values(out, label, from_vector(expected, {}, kFloat64), tol);
}

const Fixtures& torch_side() { return fixtures("exercises"); }

} // namespace

TEST_CASE("a transpose is a view", "[exercises][tensor]") {
    std::string out = run("tensor_transpose_view");
    // A (3,4) tensor row by row: a step along dim 0 skips 4 elements.
    CHECK_THAT(out, Catch::Contains("x strides: (4,1)\n"));
    CHECK_THAT(out, Catch::Contains("x.t() strides: (1,4)\n"));
    CHECK_THAT(out, Catch::Contains("x.t() is contiguous: False\n"));
    CHECK_THAT(out, Catch::Contains("same storage: True\n"));
    CHECK(value(out, "x[1][0] after t[0][1] = 100") == 100);
    CHECK_THAT(out, Catch::Contains("x.t().view(12): [view] a tensor of shape (4,3) with strides (1,4) cannot be "
                                    "viewed as (12) without a copy"));
    // Element k of x.t() flattened is t[k/3][k%3] = x[k%3][k/3] = 4 (k%3) + k/3, x[1][0] now 100.
    std::vector<double> expected;
    for (int k = 0; k < 12; ++k) expected.push_back(k % 3 == 1 && k / 3 == 0 ? 100 : 4 * (k % 3) + k / 3);
    require_values(out, "x.t().reshape(12)", expected, {0, 0});
    CHECK_THAT(out, Catch::Contains("reshape copied: True\n"));
}

TEST_CASE("gradients accumulate", "[exercises][autograd]") {
    std::string out = run("autograd_accumulate");
    require_values(out, "x.grad after one backward", {2, -4, 6}, {0, 0}); // 2x
    require_values(out, "x.grad after two", {4, -8, 12}, {0, 0});         // 2x + 2x
    require_values(out, "x.grad after zero_grad and one more", {2, -4, 6}, {0, 0});
    require_values(out, "d(a*a + a)/da at a = 3", {7}, {0, 0}); // 2a + 1
    // w -= 0.1 * 2 (w - 5): w - 5 shrinks by 0.8 a step.
    CHECK(value(out, "w after 20 steps with zero_grad") == Approx(5 * (1 - std::pow(0.8, 20))).epsilon(1e-6));
    // Without zero_grad the step follows G, the sum of every gradient so far.
    double w = 0, G = 0;
    for (int step = 0; step < 20; ++step) {
        G += 2 * (w - 5);
        w -= 0.1 * G;
    }
    CHECK(value(out, "w after 20 steps without") == Approx(w).epsilon(1e-5));
    CHECK(std::abs(w - 5) > 1); // far from the minimum: the exercise's point
}

TEST_CASE("the gradient of a broadcast is a sum", "[exercises][ops]") {
    std::string out = run("broadcast_gradient");
    std::vector<double> c = values(out, "c (4,3), the gradient reaching y");
    REQUIRE(c.size() == 12);
    std::vector<double> rows(3, 0.0), cols(4, 0.0);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j) {
            rows[j] += c[i * 3 + j]; // over the 4 rows: b's gradient
            cols[i] += c[i * 3 + j]; // over the 3 columns: col's
        }
    require_values(out, "x.grad (4,3)", c, {0, 0});
    require_values(out, "b.grad (3,)", rows, {1e-6, 1e-6});
    require_values(out, "col.grad (4,1)", cols, {1e-6, 1e-6});
    require_values(out, "sum_to(c, (3,))", rows, {1e-6, 1e-6});
}

TEST_CASE("softmax by hand overflows; the loss of a guess", "[exercises][softmax]") {
    std::string out = run("softmax_by_hand");
    double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
    std::vector<double> p = {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z};
    require_values(out, "naive softmax of [1, 2, 3]", p, {1e-6, 1e-7});
    require_values(out, "softmax of [1, 2, 3]", p, {1e-6, 1e-7});
    // exp(101) overflows float32 (largest finite about e^88.7): inf / inf.
    for (double v : values(out, "naive softmax of [101, 102, 103]")) CHECK(std::isnan(v));
    require_values(out, "stable softmax of [101, 102, 103]", p, {1e-6, 1e-7});
    require_values(out, "softmax of [101, 102, 103]", p, {1e-6, 1e-7});
    CHECK(value(out, "loss of a uniform guess") == Approx(std::log(65.0)).epsilon(1e-6));
    CHECK(value(out, "loss of a confident right guess") == Approx(std::log1p(64 * std::exp(-10.0))).epsilon(1e-4));
    CHECK(value(out, "loss of a confident wrong guess") == Approx(std::log(std::exp(10.0) + 64)).epsilon(1e-6));
}

TEST_CASE("without the scale the scores' variance is head_size", "[exercises][attention]") {
    std::string out = run("attention_scale");
    REQUIRE(value(out, "head_size") == 16);
    // Each score sums hs products of independent unit normals: variance hs.
    // Over 65,536 scores (rows share a query, columns a key) the sample
    // variance has a standard deviation near 0.27 (PyTorch over 200 seeds:
    // 0.26), so +-10% is 6 of them; scaled by hs^-0.5 it is 1 +- 0.017.
    CHECK(value(out, "var(q k^T) without the scale") == Approx(16).epsilon(0.1));
    CHECK(value(out, "var(q k^T) with the scale") == Approx(1).epsilon(0.1));
    // Larger scores make softmax peakier: the largest weight of a row grows.
    CHECK(value(out, "mean largest softmax weight without the scale") >
          3 * value(out, "mean largest softmax weight with the scale"));
    // The lecture's softmax([0.1, -0.2, 0.3, -0.2, 0.5]) and of 8 times it.
    for (double k : {1.0, 8.0}) {
        std::vector<double> s = {0.1, -0.2, 0.3, -0.2, 0.5}, e;
        double z = 0;
        for (double v : s) z += std::exp(k * v);
        for (double v : s) e.push_back(std::exp(k * v) / z);
        require_values(out, k == 1 ? "softmax(s)" : "softmax(8 s)", e, {1e-5, 1e-7});
    }
}

TEST_CASE("reshape without the transpose mixes the heads", "[exercises][attention]") {
    std::string out = run("attention_merge_heads");
    const Fixtures& f = torch_side();
    require_values(out, "merged with the transpose", f.tensor("merge.right"), {0, 0});
    require_values(out, "merged without the transpose", f.tensor("merge.wrong"), {0, 0});
    CHECK_FALSE(allclose(f.tensor("merge.right"), f.tensor("merge.wrong"))); // PyTorch disagrees with itself too
    CHECK_THAT(out, Catch::Contains("cat(heads) == transpose, reshape: True\n"));
    CHECK_THAT(out, Catch::Contains("cat(heads) == reshape alone: False\n"));
    CHECK(value(out, "largest difference with the transpose") == 0);
    CHECK(value(out, "largest difference without it") > 0.1);
    // Slot j of token t lands right only where t * NH + j = j * T + t.
    const int B = 2, T = 4, NH = 2, hs = 4;
    int right = 0;
    for (int t = 0; t < T; ++t)
        for (int j = 0; j < NH; ++j) right += t * NH + j == j * T + t ? B * hs : 0;
    CHECK(value(out, "positions right without the transpose") == right);
}

TEST_CASE("a head without the mask sees the future", "[exercises][attention]") {
    std::string out = run("attention_noncausal_head");
    CHECK(value(out, "causal: largest change of outputs 0..T-2") == 0); // exactly: never read
    CHECK(value(out, "causal: largest change of output T-1") > 1e-3);
    CHECK(value(out, "non-causal: largest change of outputs 0..T-2") > 1e-3);
    CHECK(value(out, "causal: inputs reaching output 0") == 1);     // itself
    CHECK(value(out, "non-causal: inputs reaching output 0") == 6); // all T
}

TEST_CASE("a GPT without the mask beats the entropy of random text", "[exercises][gpt]") {
    std::string out = run("gpt_forget_mask");
    const double ln_v = std::log(16.0), T = 8;
    CHECK(value(out, "ln V, the loss of a uniform guess") == Approx(ln_v).epsilon(1e-6));
    // Tokens independent and uniform: no causal model can expect less than
    // ln V (Gibbs' inequality); 1,024 validation tokens put the estimate
    // within about 0.01 of its expectation.
    double masked = value(out, "val loss with the mask");
    CHECK(masked > ln_v - 0.05);
    CHECK(masked < ln_v + 0.1);
    // Without the mask only the last position cannot see its answer: the
    // loss can fall to ln V / T, and falls far below ln V.
    double unmasked = value(out, "val loss without the mask");
    CHECK(unmasked < ln_v / 2);
    CHECK(unmasked > ln_v / T - 0.05);
}

TEST_CASE("a GPT with RMSNorm trains as its PyTorch twin", "[exercises][gpt]") {
    std::string out = run("gpt_rmsnorm");
    const Fixtures& f = torch_side();
    double with_layer_norm = value(out, "parameters with LayerNorm");
    CHECK(with_layer_norm == f.tensor("rmsnorm.num_parameters_layernorm").item());
    CHECK(value(out, "parameters with RMSNorm") == f.tensor("rmsnorm.num_parameters").item());
    CHECK(with_layer_norm - value(out, "parameters with RMSNorm") == (2 * 2 + 1) * 32); // 5 norms lose a bias
    require_values(out, "losses", f.tensor("rmsnorm.losses"), {1e-5, 1e-6});
    require_values(out, "ln_f.weight after 5 steps", f.tensor("rmsnorm.ln_f_weight"), {1e-4, 1e-5});
}

TEST_CASE("dropout scales what it keeps, and eval() turns it off", "[exercises][training]") {
    std::string out = run("dropout_eval");
    // 100,000 draws: the fraction zeroed has a standard deviation of
    // sqrt(0.2 * 0.8 / 100000) = 0.0013, so +-0.01 is over 7 of them.
    CHECK(value(out, "fraction zeroed") == Approx(0.2).margin(0.01));
    CHECK(value(out, "largest kept value") == 1 / (1 - 0.2f));           // 1.25, exact in float32
    CHECK(value(out, "mean after dropout") == Approx(1).margin(0.0125)); // 1.25 times the fraction kept
    CHECK(value(out, "loss twice in training mode, difference") > 1e-4); // new masks each call
    CHECK(value(out, "loss twice after eval(), difference") == 0);       // no randomness left
}

TEST_CASE("SGD with momentum, written by hand, matches torch.optim.SGD", "[exercises][training]") {
    std::string out = run("sgd_momentum");
    const Fixtures& f = torch_side();
    require_values(out, "losses, plain SGD", f.tensor("sgd.plain.losses"), {1e-5, 1e-7});
    require_values(out, "losses, MomentumSGD", f.tensor("sgd.momentum.losses"), {1e-5, 1e-7});
    require_values(out, "weight after 5 steps", f.tensor("sgd.momentum.weight"), {1e-5, 1e-6});
    require_values(out, "bias after 5 steps", f.tensor("sgd.momentum.bias"), {1e-5, 1e-6});
    CHECK(value(out, "largest difference from optim::SGD(momentum = 0.9)") < 1e-6); // the same rule
}

TEST_CASE("swish as a Function: the right backward passes gradcheck, the wrong fails", "[exercises][extending]") {
    std::string out = run("swish_function");
    const Fixtures& f = torch_side();
    require_values(out, "x", f.tensor("swish.x"), {0, 0});
    require_values(out, "swish(x)", f.tensor("swish.out"), {1e-8, 1e-9}); // F.silu
    require_values(out, "d sum(swish(x)) / dx", f.tensor("swish.grad"), {1e-8, 1e-9});
    CHECK_THAT(out, Catch::Contains("gradcheck of Swish: passed\n"));
    CHECK_THAT(out, Catch::Contains("gradcheck of WrongSwish: failed\n"));
    // The first mismatch is at x = -2: the wrong backward gives sigmoid(-2),
    // finite differences swish'(-2), which PyTorch's autograd gives too.
    size_t at = out.find("at element (0)");
    REQUIRE(at != std::string::npos);
    size_t a = out.find("analytic ", at), n = out.find("numerical ", at);
    REQUIRE(a != std::string::npos);
    REQUIRE(n != std::string::npos);
    CHECK(std::strtod(out.c_str() + a + 9, nullptr) == Approx(1 / (1 + std::exp(2.0))).epsilon(1e-5));
    CHECK(std::strtod(out.c_str() + n + 10, nullptr) == Approx(f.tensor("swish.grad")[0].item()).epsilon(1e-5));
}

TEST_CASE("a rotary embedding matches PyTorch and turns by the distance", "[exercises][extending]") {
    std::string out = run("rotary_embedding");
    const Fixtures& f = torch_side();
    require_values(out, "rope(x) for x = randn(1, 2, 6, 8) after manual_seed(0)", f.tensor("rope.out"), {1e-5, 1e-5});
    require_values(out, "scores[0], the query at 0 against keys at 0..5", f.tensor("rope.scores0"), {1e-5, 1e-4});
    // A turn keeps lengths; turned scores depend only on the distance (float32 rounding aside).
    CHECK(value(out, "largest change of a row's length") < 1e-5);
    CHECK(value(out, "largest spread along a diagonal of the scores") < 1e-4);
}
