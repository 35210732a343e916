// Test assertions: see check.h.
#include "check.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>

namespace ember::testing {

void require_close(const Tensor& actual, const Tensor& expected, Tolerance tol, const std::string& what) {
    INFO(what);
    REQUIRE(actual.defined());
    REQUIRE(expected.defined());
    REQUIRE(shape_str(actual.shape()) == shape_str(expected.shape()));
    REQUIRE(dtype_name(actual.dtype()) == std::string(dtype_name(expected.dtype())));
    Tensor a = actual.detach().to(kFloat64).contiguous();
    Tensor e = expected.detach().to(kFloat64).contiguous();
    const double* pa = a.data_ptr<double>();
    const double* pe = e.data_ptr<double>();
    double worst = 0;
    int64_t first_bad = -1;
    for (int64_t i = 0; i < a.numel(); ++i) {
        double x = pa[i], y = pe[i];
        bool ok;
        if (std::isnan(y)) ok = std::isnan(x);
        else if (std::isinf(y)) ok = x == y;
        else ok = std::abs(x - y) <= tol.atol + tol.rtol * std::abs(y);
        if (!std::isnan(x) && !std::isnan(y) && !std::isinf(y)) worst = std::max(worst, std::abs(x - y));
        if (!ok && first_bad < 0) first_bad = i;
    }
    std::ostringstream msg;
    msg << "largest difference " << worst << " (rtol " << tol.rtol << ", atol " << tol.atol << ")";
    if (first_bad >= 0)
        msg << "; first element out of tolerance: flat index " << first_bad << ", got " << pa[first_bad]
            << ", expected " << pe[first_bad];
    INFO(msg.str());
    REQUIRE(first_bad == -1);
}

std::vector<float> pattern_values(int64_t n, uint32_t seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
    }
    return v;
}

void require_equal(const Tensor& actual, const Tensor& expected, const std::string& what) {
    INFO(what);
    REQUIRE(actual.defined());
    REQUIRE(shape_str(actual.shape()) == shape_str(expected.shape()));
    REQUIRE(dtype_name(actual.dtype()) == std::string(dtype_name(expected.dtype())));
    Tensor a = actual.detach().contiguous();
    Tensor e = expected.detach().contiguous();
    // Bits must match, except that any NaN matches any NaN (the fixture
    // format, like Python's float.hex, does not keep a NaN's sign or payload).
    int64_t first_bad = -1;
    dispatch(a.dtype(), [&]<typename T>(TypeTag<T>) {
        const T* pa = a.data_ptr<T>();
        const T* pe = e.data_ptr<T>();
        for (int64_t i = 0; i < a.numel() && first_bad < 0; ++i) {
            if constexpr (std::is_floating_point_v<T>) {
                if (std::isnan(pa[i]) && std::isnan(pe[i])) continue;
            }
            if (std::memcmp(&pa[i], &pe[i], sizeof(T)) != 0) first_bad = i;
        }
    });
    if (first_bad >= 0) {
        Tensor a64 = a.to(kFloat64).contiguous(), e64 = e.to(kFloat64).contiguous();
        std::ostringstream msg;
        msg.precision(17);
        msg << "first differing element: flat index " << first_bad << ", got " << a64.data_ptr<double>()[first_bad]
            << ", expected " << e64.data_ptr<double>()[first_bad];
        INFO(msg.str());
        REQUIRE(first_bad == -1);
    }
}

std::vector<Tensor> case_inputs(const Fixtures& fixtures, const std::string& name) {
    std::vector<Tensor> inputs;
    for (int i = 0; fixtures.has(name + ".in" + std::to_string(i)); ++i) {
        Tensor t = fixtures.tensor(name + ".in" + std::to_string(i));
        if (fixtures.has(name + ".din" + std::to_string(i))) t.requires_grad_(true);
        inputs.push_back(t);
    }
    return inputs;
}

void check_case(const Fixtures& fixtures, const std::string& name, const OpFn& op, Tolerance tol) {
    INFO("fixture case " << name);
    std::vector<Tensor> inputs = case_inputs(fixtures, name);
    REQUIRE(!inputs.empty());
    Tensor out = op(inputs);
    require_close(out, fixtures.tensor(name + ".out"), tol, name + ": output");
    if (!fixtures.has(name + ".dout")) return;
    out.backward(fixtures.tensor(name + ".dout"));
    for (size_t i = 0; i < inputs.size(); ++i) {
        std::string key = name + ".din" + std::to_string(i);
        if (!fixtures.has(key)) continue;
        Tensor grad = inputs[i].grad();
        if (!grad.defined()) grad = zeros_like(inputs[i]);
        require_close(grad, fixtures.tensor(key), tol, key);
    }
}

void check_gradients(const Fixtures& fixtures, const std::string& name, const OpFn& op) {
    INFO("gradcheck of fixture case " << name);
    std::vector<Tensor> inputs;
    for (Tensor t : case_inputs(fixtures, name)) {
        if (t.is_floating_point()) t = t.detach().to(kFloat64).requires_grad_(t.requires_grad());
        inputs.push_back(t);
    }
    REQUIRE(gradcheck(op, inputs));
}

void check_cases(const Fixtures& fixtures, const std::vector<OpCase>& cases) {
    for (const OpCase& c : cases) {
        DYNAMIC_SECTION(c.name) { check_case(fixtures, c.name, c.op, c.tol); }
    }
}

void check_cases_gradients(const Fixtures& fixtures, const std::vector<OpCase>& cases) {
    for (const OpCase& c : cases) {
        if (!c.gradcheck || !fixtures.has(c.name + ".dout")) continue; // nothing differentiable
        DYNAMIC_SECTION(c.name) { check_gradients(fixtures, c.name, c.op); }
    }
}

std::shared_ptr<nn::Module> check_module_case(const Fixtures& fixtures, const std::string& name,
                                              const ModuleBuilder& build, Tolerance tol) {
    INFO("module fixture case " << name);
    const int64_t seed = fixtures.tensor(name + ".seed").item<int64_t>();
    manual_seed(static_cast<uint64_t>(seed));
    std::shared_ptr<nn::Module> module = build();
    module->train(fixtures.tensor(name + ".train").item<bool>());
    for (const auto& [pname, p] : module->named_parameters())
        require_equal(p.detach(), fixtures.tensor(name + ".param." + pname), name + ": initial " + pname);

    std::vector<Tensor> inputs = case_inputs(fixtures, name);
    manual_seed(static_cast<uint64_t>(seed + 1000));
    REQUIRE(inputs.size() == 1); // every module case so far takes one input
    Tensor out = module->forward(inputs[0]);
    require_close(out, fixtures.tensor(name + ".out"), tol, name + ": output");
    out.backward(fixtures.tensor(name + ".dout"));
    if (fixtures.has(name + ".din0"))
        require_close(inputs[0].grad(), fixtures.tensor(name + ".din0"), tol, name + ": din0");
    for (const auto& [pname, p] : module->named_parameters()) {
        Tensor grad = p.grad().defined() ? p.grad() : zeros_like(p);
        require_close(grad, fixtures.tensor(name + ".grad." + pname), tol, name + ": gradient of " + pname);
    }
    return module;
}

const Fixtures& fixtures(const std::string& family) {
    static std::map<std::string, Fixtures> loaded;
    auto it = loaded.find(family);
    if (it == loaded.end()) it = loaded.emplace(family, Fixtures(family)).first;
    return it->second;
}

void check_gpt_training(nn::Module& model, const GPTForward& forward, const Fixtures& f, const std::string& name,
                        int steps) {
    const int64_t seed = f.tensor(name + ".seed").item<int64_t>();
    manual_seed(static_cast<uint64_t>(seed + 1000));
    model.train();
    nn::GPTOutput out = forward(f.tensor(name + ".idx"), f.tensor(name + ".targets"));
    require_close(out.logits, f.tensor(name + ".logits"), {1e-5, 1e-5}, "logits");
    require_close(out.loss, f.tensor(name + ".loss"), {1e-6, 1e-6}, "loss");
    out.loss.backward();
    for (const auto& [pname, p] : model.named_parameters())
        require_close(p.grad(), f.tensor(name + ".grad." + pname), {1e-4, 1e-6}, "gradient of " + pname);

    model.zero_grad();
    optim::AdamW opt(model.parameters(), {.lr = 1e-2});
    manual_seed(static_cast<uint64_t>(seed + 2000));
    std::vector<double> losses;
    for (int step = 0; step < steps; ++step) {
        Tensor xb = f.tensor(name + ".batch" + std::to_string(step));
        Tensor yb = cat({xb.slice(1, 1), xb.slice(1, 0, 1)}, 1); // torch.roll(xb, -1, 1)
        Tensor loss = forward(xb, yb).loss;
        losses.push_back(loss.item());
        opt.zero_grad();
        loss.backward();
        opt.step();
    }
    require_close(from_vector(losses, {}, kFloat64), f.tensor(name + ".adamw_losses"), {1e-5, 1e-6}, "AdamW losses");
}

std::map<std::string, int> graph_op_counts(const Tensor& root) {
    std::map<std::string, int> counts;
    std::set<const Node*> seen;
    std::vector<std::shared_ptr<Node>> stack{root.grad_fn()};
    while (!stack.empty()) {
        std::shared_ptr<Node> node = stack.back();
        stack.pop_back();
        if (!node || !seen.insert(node.get()).second) continue;
        ++counts[node->name()];
        for (const auto& next : node->next_functions()) stack.push_back(next);
    }
    return counts;
}

} // namespace ember::testing
