// The module system (nn/module.h): registration, PyTorch's dotted names and
// order, buffers, train/eval, zero_grad, apply, to(dtype), state_dict and
// load_state_dict, ModuleList and Sequential, forward hooks (and that every
// nn/ layer calls its children so that theirs run), and a module defined
// here, in user code, the way the built-in ones are.
#include <catch2/catch.hpp>

#include <map>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

// A user-defined layer: y = scale * tanh(x @ W^T), with a buffer counting calls.
class ScaledTanh : public nn::Module {
public:
    ScaledTanh(int64_t in, int64_t out) : Module("ScaledTanh") {
        proj = register_module("proj", std::make_shared<nn::Linear>(in, out, false));
        scale = register_parameter("scale", ones({out}));
        calls = register_buffer("calls", zeros({}, kInt64));
        scratch = register_buffer("scratch", zeros({1}), /*persistent=*/false);
    }
    Tensor forward(const Tensor& x) override {
        {
            NoGradGuard no_grad;
            calls.add_(1);
        }
        return tanh(proj->forward(x)) * scale;
    }
    std::string extra_repr() const override { return "scaled"; }

    std::shared_ptr<nn::Linear> proj;
    Tensor scale, calls, scratch;
};

} // namespace

TEST_CASE("parameters get PyTorch's dotted names in registration order", "[module]") {
    nn::MultiHeadAttention mha(2, 4, 8, 8, 0.1);
    std::vector<std::string> names;
    for (const auto& [name, p] : mha.named_parameters()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"heads.0.key.weight", "heads.0.query.weight", "heads.0.value.weight",
                                            "heads.1.key.weight", "heads.1.query.weight", "heads.1.value.weight",
                                            "proj.weight", "proj.bias"});
    CHECK(mha.num_parameters() == 6 * 4 * 8 + 8 * 8 + 8);
    std::vector<std::string> keys;
    for (const auto& [name, t] : mha.state_dict()) keys.push_back(name);
    // PyTorch: each module's parameters, then its buffers, then its children's.
    CHECK(keys.front() == "heads.0.tril");
    CHECK(keys[1] == "heads.0.key.weight");
    CHECK(mha.named_buffers().size() == 2);
}

TEST_CASE("a module defined in user code works like a built-in one", "[module]") {
    manual_seed(0);
    ScaledTanh m(3, 2);
    std::vector<std::string> names;
    for (const auto& [name, p] : m.named_parameters()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"scale", "proj.weight"});
    Tensor x = randn({4, 3});
    Tensor y = m(x);
    CHECK(y.shape() == Shape{4, 2});
    CHECK(m.calls.item<int64_t>() == 1);
    sum(y).backward();
    CHECK(m.scale.grad().defined());
    CHECK(m.proj->weight.grad().defined());
    m.zero_grad();
    CHECK_FALSE(m.scale.grad().defined());
    // The non-persistent buffer stays out of state_dict.
    nn::StateDict sd = m.state_dict();
    CHECK(sd.contains("calls"));
    CHECK_FALSE(sd.contains("scratch"));
    CHECK(m.repr() == "ScaledTanh(\n  scaled\n  (proj): Linear(in_features=3, out_features=2, bias=False)\n)");
    auto x64 = randn({2, 3}, kFloat64).requires_grad_();
    m.to(kFloat64);
    CHECK(m.scale.dtype() == kFloat64); // the member handle sees the conversion
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return m(in[0]); }, {x64}));
}

TEST_CASE("train() and eval() reach every submodule", "[module]") {
    nn::GPTLanguageModel gpt(
        {.vocab_size = 5, .block_size = 4, .n_embd = 8, .n_head = 2, .n_layer = 2, .dropout = 0.5});
    gpt.eval();
    for (const auto& [name, m] : gpt.named_modules()) {
        INFO(name);
        CHECK_FALSE(m->is_training());
    }
    gpt.train();
    for (const auto& [name, m] : gpt.named_modules()) CHECK(m->is_training());
}

TEST_CASE("apply visits children before parents, in registration order", "[module]") {
    nn::Sequential seq({std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Sequential>(
                            std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Dropout>(0.1)})});
    std::vector<std::string> order;
    seq.apply([&](nn::Module& m) { order.push_back(m.type_name()); });
    CHECK(order == std::vector<std::string>{"Linear", "ReLU", "Dropout", "Sequential", "Sequential"});
    CHECK(seq.at<nn::Linear>(0)->out_features == 2);
    CHECK_THROWS_AS(seq.at<nn::Linear>(1), ValueError);
    CHECK_THROWS_AS(seq[5], IndexError);
}

TEST_CASE("load_state_dict copies by name, and checks everything first", "[module]") {
    manual_seed(1);
    nn::Linear a(3, 2), b(3, 2);
    b.load_state_dict(a.state_dict());
    require_equal(b.weight.detach(), a.weight.detach());
    CHECK(b.weight.requires_grad()); // still a parameter
    nn::StateDict partial;
    partial.insert("weight", zeros({2, 3}));
    CHECK_THROWS_WITH(b.load_state_dict(partial), Catch::Contains("missing keys: bias"));
    require_equal(b.weight.detach(), a.weight.detach()); // untouched by the failed load
    b.load_state_dict(partial, /*strict=*/false);
    require_equal(b.weight.detach(), zeros({2, 3}));
    nn::StateDict wrong;
    wrong.insert("weight", zeros({3, 3}));
    wrong.insert("bias", zeros({2}));
    CHECK_THROWS_AS(b.load_state_dict(wrong), ShapeError);
}

TEST_CASE("registration refuses bad and duplicate names", "[module][errors]") {
    class Bad : public nn::Module {
    public:
        Bad() : Module("Bad") {}
        void add(const std::string& name) { register_parameter(name, zeros({1})); }
    };
    Bad bad;
    bad.add("w");
    CHECK_THROWS_AS(bad.add("w"), ValueError);
    CHECK_THROWS_AS(bad.add("a.b"), ValueError);
    CHECK_THROWS_AS(bad.add(""), ValueError);
    CHECK_THROWS_WITH(nn::ModuleList()(ones({1})), Catch::Contains("[ModuleList]") && Catch::Contains("forward"));
}

TEST_CASE("a module inside itself is refused, naming both, and nothing leaks", "[module][errors]") {
    // Registering a module as a child of its own child was accepted: the
    // two shared_ptrs held each other, and both leaked.
    std::weak_ptr<nn::Module> parent_alive, child_alive;
    {
        auto parent = std::make_shared<nn::Module>("Parent");
        auto child = std::make_shared<nn::Module>("Child");
        auto grandchild = std::make_shared<nn::Module>("Grandchild");
        parent_alive = parent;
        child_alive = child;
        parent->register_module("child", child);
        child->register_module("inner", grandchild);
        CHECK_THROWS_WITH(child->register_module("up", parent),
                          Catch::Contains("[Child]") && Catch::Contains("submodule \"up\" (Parent)") &&
                              Catch::Contains("holds this Child as its submodule \"child\""));
        CHECK_THROWS_WITH(grandchild->register_module("up", parent),
                          Catch::Contains("holds this Grandchild as its submodule \"child.inner\""));
        CHECK_THROWS_WITH(parent->register_module("me", parent),
                          Catch::Contains("[Parent]") && Catch::Contains("holds this Parent itself"));
        CHECK_THROWS_AS(child->replace_module("inner", parent), ValueError);
        CHECK(child->named_children().size() == 1); // nothing was added
        CHECK(parent->named_modules().size() == 3);
    }
    CHECK(parent_alive.expired());
    CHECK(child_alive.expired());
}

TEST_CASE("a module registered twice is one module, as in PyTorch", "[module]") {
    auto shared = std::make_shared<nn::Linear>(2, 2);
    nn::Sequential seq({shared, shared});
    std::vector<std::string> visited;
    seq.apply([&](nn::Module& m) { visited.push_back(m.type_name()); });
    CHECK(visited == std::vector<std::string>{"Linear", "Sequential"}); // PyTorch's order, h once
    CHECK(seq.named_modules().size() == 2);
    CHECK(seq.parameters().size() == 2);
}

TEST_CASE("replace_module and replace_parameter put a new one in the old one's place", "[module]") {
    nn::Sequential seq({std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::ReLU>()});
    // The replacement keeps the position, so the names and their order stay.
    seq.replace_module("0", std::make_shared<nn::Linear>(2, 3, false));
    std::vector<std::string> names;
    for (const auto& [name, p] : seq.named_parameters()) names.push_back(name);
    CHECK(names == std::vector<std::string>{"0.weight"});
    CHECK_THROWS_WITH(seq.replace_module("2", std::make_shared<nn::ReLU>()),
                      Catch::Contains("[Sequential]") && Catch::Contains("no submodule \"2\""));
    // Tying: one tensor in two modules is one parameter, listed once, and
    // both uses add to its gradient.
    nn::Linear a(2, 2, false), b(2, 2, false);
    b.weight = b.replace_parameter("weight", a.weight);
    CHECK(b.weight.impl() == a.weight.impl());
    Tensor x = ones({1, 2});
    (a(x) + b(x)).sum().backward();
    require_equal(a.weight.grad(), full({2, 2}, 2.0f), "the gradient of both uses");
    CHECK_THROWS_WITH(a.replace_parameter("bias", ones({2})),
                      Catch::Contains("[Linear]") && Catch::Contains("no parameter \"bias\""));
    CHECK_THROWS_AS(a.replace_parameter("weight", Tensor()), ValueError);
}

TEST_CASE("to() converts floating parameters and their gradients, and refuses other dtypes", "[module]") {
    nn::Linear lin(2, 2);
    sum(lin(ones({1, 2}))).backward();
    lin.to(kFloat64);
    CHECK(lin.weight.grad().dtype() == kFloat64); // kept, converted
    CHECK_THROWS_AS(lin.to(kInt64), DTypeError);
    CHECK_THROWS_WITH(lin.to(kBool), Catch::Contains("Linear") && Catch::Contains("bool"));
    CHECK(lin.weight.dtype() == kFloat64);
}

TEST_CASE("zero-size layers build, as in PyTorch", "[module]") {
    nn::Linear empty_in(0, 3);
    CHECK(empty_in.weight.shape() == Shape{3, 0});
    require_equal(empty_in(zeros({2, 0})), zeros({2, 3}) + empty_in.bias.detach());
}

TEST_CASE("forward hooks run when a module is called, in order, until removed", "[module][hooks]") {
    manual_seed(0);
    nn::Linear lin(3, 2);
    std::vector<std::string> log;
    Tensor seen_in, seen_out;
    nn::RemovableHandle pre = lin.register_forward_pre_hook(
        [&](nn::Module& m, const Tensor& x) { log.push_back("pre " + m.type_name() + " " + shape_str(x.shape())); });
    nn::RemovableHandle post = lin.register_forward_hook([&](nn::Module&, const Tensor& x, const Tensor& y) {
        log.push_back("post " + shape_str(y.shape()));
        seen_in = x;
        seen_out = y;
    });
    Tensor x = randn({4, 3});
    Tensor y = lin(x);
    CHECK(log == std::vector<std::string>{"pre Linear (4,3)", "post (4,2)"});
    CHECK(seen_in.is_same(x));
    CHECK(seen_out.is_same(y));
    // forward() itself skips the hooks, as PyTorch's module.forward(x) does.
    lin.forward(x);
    CHECK(log.size() == 2);
    post.remove();
    lin(x);
    CHECK(log.size() == 3); // the pre-hook only
    pre.remove();
    pre.remove(); // a second remove does nothing
    lin(x);
    CHECK(log.size() == 3);
    CHECK_THROWS_AS(lin.register_forward_hook(nullptr), ValueError);
}

TEST_CASE("a hook may remove itself while it runs; a handle outlives its module", "[module][hooks]") {
    nn::ReLU relu;
    int calls = 0;
    nn::RemovableHandle handle;
    handle = relu.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) {
        ++calls;
        handle.remove();
    });
    relu(ones({2}));
    relu(ones({2}));
    CHECK(calls == 1);
    nn::RemovableHandle orphan;
    {
        auto temporary = std::make_shared<nn::ReLU>();
        orphan = temporary->register_forward_hook([](nn::Module&, const Tensor&, const Tensor&) {});
    }
    orphan.remove(); // the module is gone: nothing to do, and no crash
}

TEST_CASE("every layer of ember's GPTs runs its children's hooks", "[module][hooks]") {
    // The lecture's model (a list of heads, a FeedForward's Sequential) and
    // the fast model (unfused: with flash, the fused op does the attention
    // dropout's work itself): every module in the tree must be called
    // through operator(), once per forward.
    for (bool fast : {false, true}) {
        manual_seed(0);
        const nn::GPTConfig config{
            .vocab_size = 11, .block_size = 4, .n_embd = 8, .n_head = 2, .n_layer = 2, .dropout = 0.1};
        std::shared_ptr<nn::Module> model = std::make_shared<nn::GPTLanguageModel>(config);
        if (fast) {
            nn::fast::GPTConfig c = nn::fast::GPTConfig::lecture(config);
            c.flash = false;
            model = std::make_shared<nn::fast::GPT>(c);
        }
        std::map<std::string, int> calls;
        std::vector<nn::RemovableHandle> handles;
        for (const auto& [name, m] : model->named_modules())
            handles.push_back(m->register_forward_hook(
                [&calls, name = name](nn::Module&, const Tensor&, const Tensor&) { ++calls[name]; }));
        (*model)(randint(0, 11, {2, 4}));
        for (const auto& [name, m] : model->named_modules()) {
            // A list or a dict has no forward: its owner calls its items.
            if (m->type_name() == "ModuleList" || m->type_name() == "ModuleDict") continue;
            INFO((fast ? "fast: " : "lecture: ") << "module \"" << name << "\" (" << m->type_name() << ")");
            CHECK(calls[name] == 1);
        }
        for (auto& h : handles) h.remove();
    }
}
