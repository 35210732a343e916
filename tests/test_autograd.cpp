// The autograd engine (core/autograd/autograd.cpp): gradients by hand-derived math,
// accumulation, retain_graph, detach, no-grad, deep graphs, freeing, in-place
// checks, and the engine's errors.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("backward computes d(sum(x*w + b))/d(x, w, b)", "[autograd]") {
    Tensor x = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}}).requires_grad_();
    Tensor w = tensor({0.5f, -1.0f}).requires_grad_();
    Tensor b = tensor({2.0f}).requires_grad_();
    Tensor y = sum(x * w + b);
    CHECK(y.item<float>() == (0.5f - 2.0f + 1.5f - 4.0f) + 4 * 2.0f);
    y.backward();
    require_equal(x.grad(), tensor({{0.5f, -1.0f}, {0.5f, -1.0f}}), "dx = w, broadcast over rows");
    require_equal(w.grad(), tensor({4.0f, 6.0f}), "dw = column sums of x");
    require_equal(b.grad(), tensor({4.0f}), "db = number of elements");
}

TEST_CASE("a tensor used several times gets the sum of its gradients", "[autograd]") {
    Tensor x = tensor({1.0, 2.0, -3.0}, kFloat64).requires_grad_();
    Tensor y = sum(x * x + x * 3 + exp(x) * x);
    y.backward();
    // d/dx (x^2 + 3x + x e^x) = 2x + 3 + e^x (1 + x)
    Tensor xd = x.detach();
    require_close(x.grad(), xd * 2 + 3 + exp(xd) * (xd + 1), {1e-12, 1e-12});
}

TEST_CASE("gradients accumulate until zero_grad", "[autograd]") {
    Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
    sum(x * 3).backward();
    sum(x * 3).backward();
    require_equal(x.grad(), tensor({6.0f, 6.0f}));
    x.zero_grad();
    CHECK_FALSE(x.grad().defined());
    sum(x * x).backward();
    require_equal(x.grad(), tensor({2.0f, 4.0f}));
}

TEST_CASE("backward from a non-scalar needs a gradient of the output's shape", "[autograd]") {
    Tensor x = tensor({1.0f, 2.0f, 3.0f}).requires_grad_();
    Tensor y = x * x;
    CHECK_THROWS_AS(y.backward(), AutogradError);
    CHECK_THROWS_WITH(y.backward(),
                      Catch::Contains("[backward]") && Catch::Contains("scalar") && Catch::Contains("(3)"));
    CHECK_THROWS_AS(y.backward(ones({2})), ShapeError);
    y.backward(tensor({1.0f, 0.0f, -1.0f}));
    require_equal(x.grad(), tensor({2.0f, 0.0f, -6.0f}));
}

TEST_CASE("backward on a tensor that needs no grad is an error", "[autograd][errors]") {
    Tensor x = ones({2});
    CHECK_THROWS_AS(sum(x).backward(), AutogradError);
    CHECK_THROWS_WITH(sum(x).backward(), Catch::Contains("does not require grad"));
    Tensor p = ones({2}).requires_grad_();
    {
        NoGradGuard no_grad;
        Tensor y = sum(p * 2);
        CHECK_FALSE(y.requires_grad());
        CHECK_THROWS_AS(y.backward(), AutogradError);
    }
}

TEST_CASE("a second backward through a freed graph is an error; retain_graph allows it", "[autograd]") {
    Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
    Tensor y = sum(exp(x));
    y.backward();
    CHECK_THROWS_AS(y.backward(), AutogradError);
    CHECK_THROWS_WITH(y.backward(), Catch::Contains("already freed") && Catch::Contains("retain_graph"));

    Tensor z = sum(exp(x));
    x.zero_grad();
    z.backward({}, /*retain_graph=*/true);
    z.backward();
    require_close(x.grad(), exp(x.detach()) * 2);
}

TEST_CASE("detach and no-grad cut the graph; requires_grad spreads to results", "[autograd]") {
    Tensor x = ones({2}).requires_grad_();
    Tensor y = x * 2;
    CHECK(y.requires_grad());
    CHECK_FALSE(y.is_leaf());
    CHECK(y.grad_fn()->name() == "MulBackward0"); // the name Python torch prints for x * 2
    Tensor d = y.detach();
    CHECK_FALSE(d.requires_grad());
    CHECK(d.is_leaf());
    CHECK(d.storage() == y.storage());
    {
        NoGradGuard outer;
        { NoGradGuard inner; }
        CHECK_FALSE(GradMode::is_enabled()); // the inner guard restored "off"
        CHECK_FALSE((x * 2).requires_grad());
    }
    CHECK(GradMode::is_enabled());
    CHECK_FALSE((ones({2}) * 2).requires_grad());
    CHECK_THROWS_AS(y.requires_grad_(), AutogradError); // only leaves
    CHECK_THROWS_AS(ones({2}, kInt64).requires_grad_(), DTypeError);
}

TEST_CASE("the graph records PyTorch's node names and edges", "[autograd]") {
    Tensor a = ones({2, 2}).requires_grad_();
    Tensor b = ones({2, 2});
    Tensor y = sum(matmul(a, b).relu());
    CHECK(y.grad_fn()->name() == "SumBackward0");
    Node* relu_node = y.grad_fn()->next_functions()[0].get();
    CHECK(relu_node->name() == "ReluBackward0");
    Node* mm_node = relu_node->next_functions()[0].get();
    CHECK(mm_node->name() == "MmBackward0");
    REQUIRE(mm_node->next_functions().size() == 2);
    CHECK(mm_node->next_functions()[0]->name() == "AccumulateGrad");
    CHECK(mm_node->next_functions()[1] == nullptr); // b needs no gradient
}

TEST_CASE("retain_grad keeps an intermediate's gradient", "[autograd]") {
    Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
    Tensor h = x * 3;
    h.retain_grad();
    Tensor y = sum(h * h);
    y.backward();
    require_equal(h.grad(), tensor({6.0f, 12.0f})); // dy/dh = 2h
    require_equal(x.grad(), tensor({18.0f, 36.0f}));
}

TEST_CASE("a leaf's gradient has the leaf's dtype", "[autograd]") {
    Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
    Tensor y = sum(x * ones({2}, kFloat64));
    CHECK(y.dtype() == kFloat64);
    y.backward();
    CHECK(x.grad().dtype() == kFloat32);
}

TEST_CASE("a graph 100000 ops deep runs backward and is freed without recursion", "[autograd]") {
    int64_t before = Node::live_count();
    {
        Tensor x = tensor({1.0}, kFloat64).requires_grad_();
        Tensor y = x;
        for (int i = 0; i < 100000; ++i) y = y * 1.0 + 0.0;
        CHECK(Node::live_count() - before >= 200000);
        sum(y).backward();
        CHECK(x.grad().item<double>() == 1.0);
    } // y, and with it the whole chain, is destroyed here
    CHECK(Node::live_count() == before);
}

TEST_CASE("a training loop keeps the number of live nodes flat", "[autograd]") {
    // Nodes own their inputs' nodes and saved values but never their own
    // output, so dropping the loss frees the graph: no cycles, no leaks.
    Tensor w = full({4, 3}, 0.1f).requires_grad_();
    Tensor x = ones({8, 4});
    int64_t baseline = Node::live_count();
    for (int step = 0; step < 50; ++step) {
        // Each step starts with the previous step's graph gone.
        REQUIRE(Node::live_count() == baseline);
        Tensor loss = mean(pow(softmax(matmul(x, w), -1) - 0.5, 2));
        loss.backward();
        {
            NoGradGuard no_grad;
            w.sub_(w.grad() * 0.1);
        }
        w.zero_grad();
    }
    CHECK(Node::live_count() == baseline);
}

TEST_CASE("a graph dropped without backward is freed too", "[autograd]") {
    int64_t before = Node::live_count();
    {
        Tensor x = ones({3}).requires_grad_();
        Tensor y = sum(tanh(x * 2) + x);
        CHECK(Node::live_count() > before);
    }
    CHECK(Node::live_count() == before);
}

TEST_CASE("backward refuses a saved tensor that was modified in place", "[autograd][errors]") {
    Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
    Tensor y = exp(x); // ExpBackward saves its output y
    Tensor z = sum(y * 2);
    y.add_(1); // ... which this overwrites
    CHECK_THROWS_AS(z.backward(), AutogradError);
    CHECK_NOTHROW(sum(exp(x) * 2).backward()); // a fresh graph is fine
    Tensor a = x * 2;
    Tensor b = sum(a);
    a.mul_(2); // neither SumBackward nor MulBackward saved a: PyTorch allows this too
    b.backward();
    CHECK(x.grad().defined());
}

TEST_CASE("in-place ops on leaves and on views inside the graph are refused", "[autograd][errors]") {
    Tensor leaf = ones({2, 2}).requires_grad_();
    CHECK_THROWS_AS(leaf.fill_(0), AutogradError);
    CHECK_THROWS_WITH(leaf.masked_fill_(ones({2, 2}, kBool), 0),
                      Catch::Contains("[masked_fill_]") && Catch::Contains("leaf"));
    Tensor h = leaf * 2;
    CHECK_THROWS_AS(h[0].mul_(2), AutogradError);
    CHECK_THROWS_WITH(h.t().add_(1), Catch::Contains("view"));
    // Outside the graph, a view may be written in place freely.
    Tensor plain = zeros({2, 2});
    plain[0].add_(1);
    require_equal(plain, tensor({{1.0f, 1.0f}, {0.0f, 0.0f}}));
}

TEST_CASE("copy_ into a non-leaf makes it depend on the source", "[autograd]") {
    Tensor src = tensor({1.0f, 2.0f}).requires_grad_();
    Tensor dst = zeros({2, 2});
    dst.copy_(src); // broadcast over rows
    CHECK(dst.requires_grad());
    sum(dst * tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})).backward();
    require_equal(src.grad(), tensor({4.0f, 6.0f}));
}

TEST_CASE("an undefined tensor is refused with a clear error", "[autograd][errors]") {
    Tensor undefined;
    CHECK_FALSE(undefined.defined());
    CHECK_THROWS_AS(undefined.shape(), Error);
    CHECK_THROWS_WITH(undefined.backward(), Catch::Contains("undefined"));
}

TEST_CASE("casts between float dtypes are differentiable; casts to integers are not", "[autograd]") {
    Tensor x = tensor({1.5f, -2.0f}).requires_grad_();
    Tensor d = x.to(kFloat64);
    CHECK(d.grad_fn()->name() == "ToCopyBackward0");
    sum(d * d).backward();
    require_equal(x.grad(), tensor({3.0f, -4.0f}));
    Tensor i = x.to(kInt64);
    CHECK_FALSE(i.requires_grad());
    require_equal(i, tensor({1, -2}));
}

TEST_CASE("a view taken before an in-place op on its base cannot carry a stale history", "[autograd][errors]") {
    // PyTorch regenerates such a view's history; ember refuses to use it,
    // rather than compute a wrong gradient.
    Tensor x = ones({3}).requires_grad_();
    Tensor y = x * 1;
    Tensor v = y.slice(0, 0, 2);
    y.mul_(2);
    CHECK_THROWS_AS(sum(v), AutogradError);
    CHECK_THROWS_WITH(v * 2, Catch::Contains("take the view again"));
    Tensor fresh = y.slice(0, 0, 2);
    sum(fresh).backward();
    require_equal(x.grad(), tensor({2.0f, 2.0f, 0.0f})); // PyTorch's gradient

    Tensor w = ones({3}).requires_grad_();
    Tensor buf = zeros({3});
    Tensor early = buf.slice(0, 0, 2);
    buf.add_(w); // buf's history now includes w; `early` does not know it
    CHECK_THROWS_AS(early * 2, AutogradError);
    NoGradGuard no_grad;
    CHECK_NOTHROW(early * 2); // values are always current; only gradients could go stale
}

TEST_CASE("random fills of views inside the graph, or of a leaf's view, are refused", "[autograd][errors]") {
    Tensor x = ones({3}).requires_grad_();
    Tensor y = x * 2;
    CHECK_THROWS_AS(y.select(0, 0).uniform_(5, 6), AutogradError);
    Tensor w = ones({2, 2}).requires_grad_();
    Tensor row;
    {
        NoGradGuard no_grad;
        row = w.select(0, 0);
    }
    CHECK_THROWS_AS(row.normal_(), AutogradError);
    CHECK_THROWS_AS(row.fill_(3), AutogradError);
    NoGradGuard no_grad;
    row.fill_(3); // what an initialiser does
    require_equal(w.detach(), tensor({{3.0f, 3.0f}, {1.0f, 1.0f}}));
}

TEST_CASE("retain_grad follows its tensor through an in-place op", "[autograd]") {
    Tensor x = ones({3}).requires_grad_();
    Tensor y = x * 1;
    y.retain_grad();
    y.mul_(3);
    sum(y).backward();
    require_equal(y.grad(), tensor({1.0f, 1.0f, 1.0f})); // PyTorch's value
    require_equal(x.grad(), tensor({3.0f, 3.0f, 3.0f}));
}

TEST_CASE("filling a tensor in the graph passes back a zero gradient, as in PyTorch", "[autograd]") {
    Tensor x = ones({3}).requires_grad_();
    Tensor y = x * 2;
    y.fill_(1);
    CHECK(y.grad_fn()->name() == "FillBackward2");
    sum(y).backward();
    require_equal(x.grad(), tensor({0.0f, 0.0f, 0.0f}));
    Tensor z = x * 2;
    z.normal_();
    CHECK(z.grad_fn()->name() == "NormalBackward0");
}

TEST_CASE("a leaf's first gradient never shares memory with a tensor anyone else holds", "[autograd]") {
    // AccumulateGrad takes the incoming gradient without a copy only when
    // nothing else can reach it. Here the gradient passed in reaches the
    // leaves as is (x directly, and through clone and add, whose backward
    // passes dout on): each .grad must be a copy.
    Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
    Tensor g = tensor({10.0f, 20.0f});
    x.backward(g);
    Tensor a = tensor({1.0f, 2.0f}).requires_grad_(), b = tensor({3.0f, 4.0f}).requires_grad_();
    (a.clone() + b).backward(g);
    g.add_(1.0f);
    require_equal(x.grad(), tensor({10.0f, 20.0f}), "x.grad after g changed");
    require_equal(a.grad(), tensor({10.0f, 20.0f}), "a.grad after g changed");
    require_equal(b.grad(), tensor({10.0f, 20.0f}), "b.grad after g changed");
    a.grad().add_(1.0f);
    require_equal(b.grad(), tensor({10.0f, 20.0f}), "b.grad after a.grad changed");
    // A gradient made inside backward (mul's) is taken as is, and later ones add to it.
    Tensor w = tensor({2.0f, 3.0f}).requires_grad_();
    sum(w * w).backward();
    sum(w * w).backward();
    require_equal(w.grad(), tensor({8.0f, 12.0f}), "2 * 2w accumulated");
}

namespace {

// HandBack's backward returns 2 * dout in the way `hand_back` says, and
// notes the data address of what it returned in `handed_back`.
enum class HandBackWay {
    fresh,           // made there, held by nothing else
    kept,            // the tensor also kept in `kept_gradient`
    memory_kept,     // a tensor over the same memory kept (its detach())
    transposed,      // alone over its memory, but not contiguous
    front_of_larger, // alone, contiguous, at offset 0 of a larger buffer
    back_of_larger,  // alone, contiguous, at an offset in a larger buffer
    requires_grad,   // fresh, but made to require grad
};
HandBackWay hand_back = HandBackWay::fresh;
Tensor kept_gradient;
const void* handed_back = nullptr;

struct HandBack : Function<HandBack> {
    static Tensor forward(AutogradContext*, const Tensor& x) { return x * 1; }
    static std::vector<Tensor> backward(AutogradContext*, const Tensor& dout) {
        Tensor g = dout * 2;
        const int64_t rows = g.size(0);
        switch (hand_back) {
        case HandBackWay::fresh: break;
        case HandBackWay::kept: kept_gradient = g; break;
        case HandBackWay::memory_kept: kept_gradient = g.detach(); break;
        case HandBackWay::transposed: g = (dout.t() * 2).t().detach(); break;
        case HandBackWay::front_of_larger: g = cat({g, zeros(g.shape())}).narrow(0, 0, rows).detach(); break;
        case HandBackWay::back_of_larger: g = cat({zeros(g.shape()), g}).narrow(0, rows, rows).detach(); break;
        case HandBackWay::requires_grad: g.requires_grad_(); break;
        }
        handed_back = g.data_ptr<float>();
        return {g};
    }
};

} // namespace

TEST_CASE("a fresh first gradient becomes .grad as it is; anything else is copied", "[autograd]") {
    // As PyTorch's AccumulateGrad (the test above has the gradients passed
    // in and handed to two leaves): a gradient backward made, alone over
    // its memory and filling it in order, becomes .grad without a copy (a
    // Linear's weight gradient each step). Anything else is copied, so that
    // .grad never shares memory with another tensor, is contiguous and
    // compact, and does not require grad.
    struct Case {
        const char* name;
        HandBackWay way;
        bool taken;
    };
    for (const Case& c : {Case{"fresh", HandBackWay::fresh, true}, Case{"kept by the op", HandBackWay::kept, false},
                          Case{"its memory kept by the op", HandBackWay::memory_kept, false},
                          Case{"transposed", HandBackWay::transposed, false},
                          Case{"the front of a larger buffer", HandBackWay::front_of_larger, false},
                          Case{"the back of a larger buffer", HandBackWay::back_of_larger, false},
                          Case{"requiring grad", HandBackWay::requires_grad, false}}) {
        DYNAMIC_SECTION(c.name) {
            hand_back = c.way;
            Tensor x = ones({3, 4}).requires_grad_();
            sum(HandBack::apply(x)).backward();
            CHECK((x.grad().data_ptr<float>() == handed_back) == c.taken);
            CHECK(x.grad().is_contiguous());
            CHECK(x.grad().storage()->nbytes() == 12 * sizeof(float));
            CHECK_FALSE(x.grad().requires_grad());
            if (kept_gradient.defined()) kept_gradient.add_(1);
            require_equal(x.grad(), full({3, 4}, 2.0f), "x.grad (after what the op kept changed)");
            kept_gradient = Tensor();
        }
    }
}

TEST_CASE("a split's pieces share one node, as PyTorch's SplitBackward0", "[autograd][split]") {
    Tensor x = arange(12.0).view({2, 6}).requires_grad_();
    std::vector<Tensor> pieces = x.chunk(3, 1); // three (2,2)
    // PyTorch 1.13: chunk and split(int) record SplitBackward0, split(sizes) SplitWithSizesBackward0.
    CHECK(pieces[0].grad_fn()->name() == "SplitBackward0");
    CHECK(pieces[0].grad_fn() == pieces[2].grad_fn());
    CHECK(x.split(Shape{1, 5}, 1)[1].grad_fn()->name() == "SplitWithSizesBackward0");
    CHECK(x.split(4, 1)[1].grad_fn()->name() == "SplitBackward0");
    // Only the middle piece used: the others' places get zeros (PyTorch's x.grad).
    (pieces[1] * 2).sum().backward();
    require_equal(x.grad(), tensor({{0.f, 0.f, 2.f, 2.f, 0.f, 0.f}, {0.f, 0.f, 2.f, 2.f, 0.f, 0.f}}), "x.grad");
}

TEST_CASE("gradients through a split's pieces, used apart and together, pass gradcheck", "[autograd][split]") {
    manual_seed(2);
    Tensor x = randn({3, 7}, kFloat64).requires_grad_();
    auto fn = [](const std::vector<Tensor>& in) {
        std::vector<Tensor> p = in[0].split(Shape{2, 4, 1}, 1); // the last piece unused
        std::vector<Tensor> q = in[0].chunk(2, 0);              // (2,7) and (1,7)
        return (p[0].sum(1) * p[1].sum(1)).sum() + tanh(q[1]).sum() + (q[0] * q[0]).sum();
    };
    CHECK(gradcheck(fn, {x}));
}

TEST_CASE("retain_grad on several pieces of one split keeps each its own gradient", "[autograd][split]") {
    Tensor x = ones({2, 4}).requires_grad_();
    Tensor y = x * 3.0;
    std::vector<Tensor> pieces = y.chunk(2, 1);
    pieces[0].retain_grad();
    pieces[1].retain_grad();
    Tensor loss = (pieces[0] * 5.0).sum() + (pieces[1] * 7.0).sum();
    loss.backward({}, /*retain_graph=*/true);
    require_equal(pieces[0].grad(), full({2, 2}, 5.0f), "first piece");
    require_equal(pieces[1].grad(), full({2, 2}, 7.0f), "second piece");
    require_equal(x.grad(), tensor({{15.f, 15.f, 21.f, 21.f}, {15.f, 15.f, 21.f, 21.f}}), "x.grad");
    loss.backward(); // the split keeps nothing that a first backward frees
    require_equal(x.grad(), tensor({{30.f, 30.f, 42.f, 42.f}, {30.f, 30.f, 42.f, 42.f}}), "x.grad, twice");
}
