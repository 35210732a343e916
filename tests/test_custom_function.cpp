// Defining differentiable ops from outside the library: this file uses only
// the public header <ember.h>, as user code does (docs/extending.md).
#include <catch2/catch.hpp>

#include <ember.h>

using ember::AutogradContext;
using ember::Tensor;

namespace {

// y = x^3, dy/dx = 3 x^2.
struct Cube : ember::Function<Cube> {
    static std::string name() { return "CubeBackward"; }
    static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        ctx->save_for_backward({x});
        return x * x * x;
    }
    static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
        Tensor x = ctx->get_saved_variables()[0];
        return {dout * 3 * x * x};
    }
};

// y = x * exp(x), saving its output too: dy/dx = exp(x) + y. Its backward
// holds the saved tensors by reference, the idiom that dangled when
// get_saved_variables() returned a copy (a segfault with no message).
struct TimesExp : ember::Function<TimesExp> {
    static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        Tensor y = x * ember::exp(x);
        ctx->save_for_backward({x, y});
        return y;
    }
    static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
        const Tensor& x = ctx->get_saved_variables()[0];
        const Tensor& y = ctx->get_saved_variables()[1];
        return {dout * (ember::exp(x) + y)};
    }
};

// y = scale * (a @ b): tensors and a number as arguments.
struct ScaledMatmul : ember::Function<ScaledMatmul> {
    static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b, double scale) {
        ctx->save_for_backward({a, b});
        ctx->saved_data["scale"] = scale;
        return ember::matmul(a, b) * scale;
    }
    static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
        std::vector<Tensor> saved = ctx->get_saved_variables();
        double scale = ctx->saved_data["scale"];
        Tensor da, db;
        if (ctx->needs_input_grad(0)) da = ember::matmul(dout, saved[1].t()) * scale;
        if (ctx->needs_input_grad(1)) db = ember::matmul(saved[0].t(), dout) * scale;
        return {da, db, Tensor()}; // no gradient for the double
    }
};

// A broken op: backward returns one gradient for two arguments.
struct WrongCount : ember::Function<WrongCount> {
    static Tensor forward(AutogradContext*, const Tensor& a, const Tensor& b) { return a + b; }
    static std::vector<Tensor> backward(AutogradContext*, const Tensor& dout) { return {dout}; }
};

// A broken op: backward returns a gradient of the wrong shape.
struct WrongShape : ember::Function<WrongShape> {
    static Tensor forward(AutogradContext*, const Tensor& a) { return ember::sum(a); }
    static std::vector<Tensor> backward(AutogradContext*, const Tensor& dout) { return {dout}; }
};

// y = x^2 in raw loops over float32, with only the public helpers:
// contiguous(), data_ptr<T>(), parallel_for (docs/extending.md). Its
// backward records the strides of the dout it received.
ember::Shape last_dout_strides;
struct Square : ember::Function<Square> {
    static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        Tensor xc = x.contiguous();                        // dense: element i at data_ptr()[i]
        Tensor out = ember::empty(xc.shape(), xc.dtype()); // fresh, so dense too
        const float* px = xc.data_ptr<float>();            // throws DTypeError unless float32
        float* po = out.data_ptr<float>();
        ember::parallel_for(0, xc.numel(), ember::kElementwiseGrain, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) po[i] = px[i] * px[i];
        });
        ctx->save_for_backward({xc});
        return out;
    }
    static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
        last_dout_strides = dout.strides();
        Tensor x = ctx->get_saved_variables()[0];
        Tensor g = dout.contiguous(); // dout may be an expanded view: one value, stride 0
        Tensor dx = ember::empty(x.shape(), x.dtype());
        const float *pg = g.data_ptr<float>(), *px = x.data_ptr<float>();
        float* pd = dx.data_ptr<float>();
        for (int64_t i = 0; i < x.numel(); ++i) pd[i] = 2 * px[i] * pg[i]; // forward: y = x^2, so dx = 2 x dout
        return {dx};
    }
};

// An op whose forward hands back its input unchanged.
struct Identity : ember::Function<Identity> {
    static Tensor forward(AutogradContext*, const Tensor& a) { return a; }
    static std::vector<Tensor> backward(AutogradContext*, const Tensor& dout) { return {dout}; }
};

} // namespace

TEST_CASE("a custom Function's forward and backward run like a built-in op", "[custom_function]") {
    Tensor x = ember::tensor({1.0f, -2.0f}).requires_grad_();
    Tensor y = Cube::apply(x);
    CHECK(y.requires_grad());
    CHECK(y.grad_fn()->name() == "CubeBackward");
    ember::sum(y * 2).backward();
    const float* g = x.grad().data_ptr<float>();
    CHECK(g[0] == 6.0f);  // 2 * 3 * 1^2
    CHECK(g[1] == 24.0f); // 2 * 3 * (-2)^2
}

TEST_CASE("custom Functions pass gradcheck, alone and inside a larger graph", "[custom_function][gradcheck]") {
    Tensor x = ember::tensor({0.5, -1.5, 2.0}, ember::kFloat64).requires_grad_();
    CHECK(ember::gradcheck([](const std::vector<Tensor>& in) { return Cube::apply(in[0]); }, {x}));
    Tensor a = ember::tensor({{1.0, 2.0, 0.5}, {-1.0, 0.0, 3.0}}, ember::kFloat64).requires_grad_();
    Tensor b = ember::tensor({{0.5, -2.0}, {1.5, 1.0}, {2.0, -0.5}}, ember::kFloat64).requires_grad_();
    CHECK(ember::gradcheck(
        [](const std::vector<Tensor>& in) { return ember::tanh(ScaledMatmul::apply(in[0], Cube::apply(in[1]), 0.25)); },
        {a, b}));
}

TEST_CASE("needs_input_grad tells backward which gradients are wanted", "[custom_function]") {
    Tensor a = ember::ones({2, 3}).requires_grad_();
    Tensor b = ember::ones({3, 2}); // a constant
    Tensor y = ScaledMatmul::apply(a, b, 2.0);
    ember::sum(y).backward();
    CHECK(a.grad().defined());
    CHECK_FALSE(b.grad().defined());
    // Without any input requiring grad, no node is recorded at all.
    CHECK_FALSE(ScaledMatmul::apply(b.t(), b, 1.0).requires_grad());
}

TEST_CASE("a raw-loop Function gets an expanded dout after sum and reads it through contiguous()",
          "[custom_function]") {
    Tensor x = ember::tensor({{1.0f, -2.0f, 3.0f}, {0.5f, 0.0f, -1.0f}}).requires_grad_();
    Tensor y = Square::apply(x.t()); // a transposed input: forward makes it dense first
    ember::sum(y).backward();
    // sum's backward hands every element the same 1: a (3,2) view of one value.
    CHECK(last_dout_strides == ember::Shape{0, 0});
    // dx = 2 x, transposed back by the view's backward.
    CHECK(ember::allclose(x.grad(), x.detach() * 2));
    // Through a product instead, dout is a dense tensor of its own.
    Tensor z = Square::apply(x);
    ember::sum(z * ember::tensor({1.0f, 2.0f, 3.0f})).backward();
    CHECK(last_dout_strides == ember::Shape{3, 1});
    CHECK_THROWS_AS(Square::apply(ember::ones({2}, ember::kFloat64)), ember::DTypeError);
}

TEST_CASE("mistakes in a custom backward are reported, not crashed on", "[custom_function][errors]") {
    Tensor a = ember::ones({2}).requires_grad_();
    Tensor b = ember::ones({2}).requires_grad_();
    CHECK_THROWS_AS(ember::sum(WrongCount::apply(a, b)).backward(), ember::AutogradError);
    CHECK_THROWS_WITH(ember::sum(WrongCount::apply(a, b)).backward(),
                      Catch::Contains("returned 1 gradients") && Catch::Contains("2 arguments"));
    CHECK_THROWS_AS(WrongShape::apply(a).backward(), ember::ShapeError);
    CHECK_THROWS_WITH(WrongShape::apply(a).backward(), Catch::Contains("()") && Catch::Contains("(2)"));
}

TEST_CASE("a custom Function's saved tensors obey the same rules as built-ins'", "[custom_function][errors]") {
    Tensor x = ember::tensor({1.0f, 2.0f}).requires_grad_();
    Tensor h = x * 1.0;
    Tensor y = ember::sum(Cube::apply(h));
    h.add_(1); // overwrites what Cube saved
    CHECK_THROWS_AS(y.backward(), ember::AutogradError);

    Tensor z = ember::sum(Cube::apply(x));
    z.backward();
    CHECK_THROWS_WITH(z.backward(), Catch::Contains("freed"));
}

TEST_CASE("saved tensors held by reference stay valid, and the graph is freed", "[custom_function]") {
    Tensor x = ember::tensor({0.5, -1.0, 2.0}, ember::kFloat64).requires_grad_();
    std::weak_ptr<ember::Node> node;
    {
        Tensor y = TimesExp::apply(x);
        node = y.grad_fn();
        ember::sum(y).backward({}, /*retain_graph=*/true);
    }
    // d/dx (x e^x) = e^x (1 + x).
    CHECK(ember::allclose(x.grad(), ember::exp(x.detach()) * (1.0 + x.detach())));
    // The saved output's grad_fn is this node: had the context kept the
    // tensors it unpacked, the retained graph would hold itself for ever.
    CHECK(node.expired());
    CHECK(ember::gradcheck([](const std::vector<Tensor>& in) { return TimesExp::apply(in[0]); },
                           {x.detach().requires_grad_()}));
}

TEST_CASE("a forward that returns its input does not rewrite the input's history", "[custom_function]") {
    Tensor x = ember::ones({2}).requires_grad_();
    Tensor y = Identity::apply(x);
    CHECK(x.is_leaf());
    CHECK_FALSE(y.is_leaf());
    CHECK(y.storage() == x.storage());
    ember::sum(y).backward();
    CHECK(x.grad().defined());
}
