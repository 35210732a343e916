// Optimisers (nn/optim.h): SGD (momentum, Nesterov, weight decay) and AdamW
// step for step against torch.optim; clip_grad_norm_ against PyTorch's;
// saving and restoring state continues a run exactly; errors.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Five steps of `make(params)` on the fixture's least-squares problem;
// compares the final weight and bias with PyTorch's.
void check_steps(const std::string& name,
                 const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make) {
    const Fixtures& f = fixtures("gpt");
    nn::Linear lin(3, 2);
    {
        NoGradGuard no_grad;
        lin.weight.copy_(f.tensor("optim." + name + ".w0"));
        lin.bias.copy_(f.tensor("optim." + name + ".b0"));
    }
    Tensor x = f.tensor("optim." + name + ".x"), y = f.tensor("optim." + name + ".y");
    auto opt = make(lin.parameters());
    for (int step = 0; step < 5; ++step) {
        opt->zero_grad();
        mean(pow(lin(x) - y, 2)).backward();
        opt->step();
    }
    require_close(lin.weight.detach(), f.tensor("optim." + name + ".w5"), {1e-5, 1e-6}, name + " weight");
    require_close(lin.bias.detach(), f.tensor("optim." + name + ".b5"), {1e-5, 1e-6}, name + " bias");
}

} // namespace

TEST_CASE("SGD and AdamW update parameters as torch.optim does", "[optim]") {
    check_steps("sgd", [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
    });
    check_steps("sgd_nesterov", [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.05, .momentum = 0.5, .nesterov = true});
    });
    check_steps("adamw", [](std::vector<Tensor> p) {
        return std::make_unique<optim::AdamW>(
            p, optim::AdamWOptions{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.9, .weight_decay = 0.1});
    });
    // Two groups: the weight decayed (0.5), the bias not; the options' own
    // weight_decay (left at 0.01) applies to neither.
    check_steps("adamw_groups", [](std::vector<Tensor> p) {
        return std::make_unique<optim::AdamW>(std::vector<optim::AdamWParamGroup>{{{p[0]}, 0.5}, {{p[1]}, 0.0}},
                                              optim::AdamWOptions{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.9});
    });
}

TEST_CASE("AdamW's groups decay only their own parameters", "[optim]") {
    // One step from zero gradients: Adam's part is 0, so p = p * (1 - lr * wd) exactly.
    Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
    optim::AdamW opt(std::vector<optim::AdamWParamGroup>{{{a}, 0.5}, {{b}, 0.0}}, optim::AdamWOptions{.lr = 0.1});
    a.set_grad(zeros({2}));
    b.set_grad(zeros({2}));
    opt.step();
    CHECK(a[0].item<float>() == Approx(0.95));
    CHECK(b[0].item<float>() == 1.0f);
    CHECK_THROWS_WITH(optim::AdamW(std::vector<optim::AdamWParamGroup>{{{a}, -1.0}}),
                      Catch::Contains("[AdamW]") && Catch::Contains("param group 0"));
}

TEST_CASE("AdamW's defaults are PyTorch's", "[optim]") {
    optim::AdamWOptions o;
    CHECK(o.lr == 1e-3);
    CHECK(o.beta1 == 0.9);
    CHECK(o.beta2 == 0.999);
    CHECK(o.eps == 1e-8);
    CHECK(o.weight_decay == 1e-2);
}

TEST_CASE("clip_grad_norm_ scales all gradients together, as PyTorch", "[optim]") {
    const Fixtures& f = fixtures("gpt");
    Tensor p1 = zeros({3}).requires_grad_(), p2 = zeros({2, 2}).requires_grad_();
    p1.set_grad(f.tensor("clip.g1"));
    p2.set_grad(f.tensor("clip.g2"));
    double total = optim::clip_grad_norm_({p1, p2}, 1.5);
    CHECK(total == Approx(f.tensor("clip.total").item<double>()).epsilon(1e-6));
    require_close(p1.grad(), f.tensor("clip.g1_after"), {1e-6, 1e-7});
    require_close(p2.grad(), f.tensor("clip.g2_after"), {1e-6, 1e-7});
    // Below the limit, gradients are left as they are.
    Tensor p3 = zeros({2}).requires_grad_();
    p3.set_grad(tensor({0.3f, 0.4f}));
    CHECK(optim::clip_grad_norm_({p3}, 1.0) == Approx(0.5));
    require_close(p3.grad(), tensor({0.3f, 0.4f}), {1e-6, 0});
}

TEST_CASE("clip_grad_norm_'s 2-norm has the bits of its definition in tensor ops", "[optim]") {
    // total = sqrt(sum over parameters of ||g||^2), each ||g|| = sqrt(sum(g^2))
    // in float64: at 1 and 2 threads, for gradients of one chunk of the sum
    // and of several (sum() adds 16,384 elements a chunk), a transposed one,
    // and float64. The fast kernel (core/kernels/sum_of_squares.cpp) sums
    // eight whole chunks side by side, from any of the gradients of one
    // dtype: here the float32 ones' 12 whole chunks make a group of eight
    // (three of one gradient, five of another) and four alone, the float64
    // ones' four whole chunks go alone, and the partial last chunks alone.
    manual_seed(11);
    const int threads = get_num_threads();
    for (int t : {1, std::min(2, max_num_threads())}) {
        set_num_threads(t);
        std::vector<Tensor> params = {zeros({7}),
                                      zeros({300, 170}),
                                      zeros({130, 260}),
                                      zeros({5000}, kFloat64),
                                      zeros({9 * 16384 + 77}),
                                      zeros({4, 16384}, kFloat64)};
        std::vector<Tensor> grads = {randn({7}),
                                     randn({300, 170}) * 1e-3,
                                     (randn({260, 130}) * 50).t(),
                                     randn({5000}, kFloat64),
                                     randn({9 * 16384 + 77}) * 3,
                                     randn({4, 16384}, kFloat64) * 1e-2};
        double expected = 0;
        for (size_t i = 0; i < params.size(); ++i) {
            params[i].requires_grad_();
            params[i].set_grad(grads[i]);
            const Tensor g = grads[i].to(kFloat64);
            const double norm = std::sqrt(sum(g * g).item<double>());
            expected += norm * norm;
        }
        expected = std::sqrt(expected);
        CHECK(optim::clip_grad_norm_(params, 1e9) == expected);
    }
    set_num_threads(threads);
}

TEST_CASE("an optimiser's saved state continues a run exactly", "[optim]") {
    auto run = [](int steps_before, bool restore) {
        manual_seed(5);
        nn::Linear lin(4, 3);
        Tensor x = randn({6, 4}), y = randn({6, 3});
        optim::AdamW opt(lin.parameters(), {.lr = 0.05});
        auto step = [&](optim::AdamW& o) {
            o.zero_grad();
            mean(pow(lin(x) - y, 2)).backward();
            o.step();
        };
        for (int i = 0; i < steps_before; ++i) step(opt);
        if (restore) {
            optim::AdamW fresh(lin.parameters(), {.lr = 0.05});
            fresh.load_state_dict(opt.state_dict());
            for (int i = steps_before; i < 6; ++i) step(fresh);
        } else {
            for (int i = steps_before; i < 6; ++i) step(opt);
        }
        return lin.weight.detach().clone();
    };
    require_equal(run(3, true), run(3, false));
}

TEST_CASE("an optimiser's state is keyed by parameter index and PyTorch's names", "[optim]") {
    // PyTorch: optimizer.state_dict()["state"] == {0: {"step", "exp_avg", "exp_avg_sq"}, ...},
    // holding only the parameters that have been updated (here b has no gradient).
    Tensor a = ones({2}).requires_grad_(), b = ones({3}).requires_grad_(), c = ones({1}).requires_grad_();
    sum(a * 2 + 1).backward();
    sum(c * 3).backward();
    optim::AdamW adamw({a, b, c});
    adamw.step();
    std::vector<std::string> keys;
    for (const auto& [key, value] : adamw.state_dict()) keys.push_back(key);
    CHECK(keys ==
          std::vector<std::string>{"0.step", "0.exp_avg", "0.exp_avg_sq", "2.step", "2.exp_avg", "2.exp_avg_sq"});
    CHECK(adamw.state_dict().at("2.step").item<int64_t>() == 1);
    optim::SGD sgd({a, b, c}, {.momentum = 0.9});
    sgd.step();
    keys.clear();
    for (const auto& [key, value] : sgd.state_dict()) keys.push_back(key);
    CHECK(keys == std::vector<std::string>{"0.momentum_buffer", "2.momentum_buffer"});
}

TEST_CASE("optimisers reject bad settings and parameters", "[optim][errors]") {
    Tensor p = zeros({2}).requires_grad_();
    CHECK_THROWS_AS(optim::SGD({}, {}), ValueError);
    CHECK_THROWS_AS(optim::SGD({p}, {.lr = -1}), ValueError);
    CHECK_THROWS_AS(optim::SGD({p}, {.nesterov = true}), ValueError);
    CHECK_THROWS_AS(optim::AdamW({p}, {.beta1 = 1.0}), ValueError);
    CHECK_THROWS_WITH(optim::AdamW({p * 2}), Catch::Contains("[AdamW]") && Catch::Contains("leaf"));
    CHECK_THROWS_AS(optim::clip_grad_norm_({p}, 1.0, 1.0), ValueError);
    optim::AdamW opt({p});
    opt.load_state_dict(nn::StateDict{}); // a fresh optimiser's state: valid
    nn::StateDict stray;
    stray.insert("7.exp_avg", zeros({2}));
    CHECK_THROWS_AS(opt.load_state_dict(stray), ValueError);
    nn::StateDict negative;
    negative.insert("0.step", scalar_tensor(-1));
    negative.insert("0.exp_avg", zeros({2}));
    negative.insert("0.exp_avg_sq", zeros({2}));
    CHECK_THROWS_AS(opt.load_state_dict(negative), ValueError);
    opt.step(); // no gradient yet: nothing happens
    require_equal(p.detach(), zeros({2}));
}

TEST_CASE("AdamW counts steps per parameter, as PyTorch", "[optim]") {
    // b gets its first gradient at the second step: its bias correction is
    // that of step 1, not 2. Values from torch.optim.AdamW(lr=0.1).
    Tensor a = tensor({1.0f, 2.0f}).requires_grad_(), b = tensor({3.0f, -1.0f}).requires_grad_();
    optim::AdamW opt({a, b}, {.lr = 0.1});
    a.set_grad(tensor({0.5f, -0.2f}));
    opt.step();
    a.set_grad(tensor({0.1f, 0.1f}));
    b.set_grad(tensor({0.3f, -0.4f}));
    opt.step();
    require_close(a.detach(), tensor({0.8177969455718994f, 2.1225357055664062f}), {1e-6, 1e-7});
    require_close(b.detach(), tensor({2.8970000743865967f, -0.8989999890327454f}), {1e-6, 1e-7});
}

TEST_CASE("AdamW follows its parameters to another dtype", "[optim]") {
    manual_seed(0);
    nn::Linear lin(3, 2);
    optim::AdamW opt(lin.parameters());
    lin.to(kFloat64);
    sum(lin(randn({4, 3}, kFloat64))).backward();
    CHECK_NOTHROW(opt.step());
    CHECK(lin.weight.dtype() == kFloat64);
}

TEST_CASE("clip_grad_norm_ lets a NaN norm poison the gradients, as PyTorch", "[optim]") {
    Tensor p = zeros({2}).requires_grad_(), q = zeros({2}).requires_grad_();
    p.set_grad(tensor({NAN, 1.0f}));
    q.set_grad(tensor({1.0f, 1.0f}));
    CHECK(std::isnan(optim::clip_grad_norm_({p, q}, 1.0)));
    CHECK(std::isnan(q.grad().index({0}).item<float>()));
}
