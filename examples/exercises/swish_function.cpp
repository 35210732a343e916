// Exercise: write swish as a Function and gradcheck it (docs/exercises.md).
// swish(x) = x * sigmoid(x) (PyTorch's F.silu). With s = sigmoid(x) and
// s' = s (1 - s), the product rule gives
//   d swish / dx = s + x s (1 - s)
// A backward that forgets the second term (treating s as a constant) looks
// plausible and trains something, but gradcheck catches it: finite
// differences of the forward disagree with it at the first element.
//
//   build/examples/exercises/swish_function
#include <iostream>

#include "exercise.h"

using namespace ember;

struct Swish : Function<Swish> {
    static std::string name() { return "SwishBackward"; }
    static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        Tensor s = sigmoid(x);
        ctx->save_for_backward({x, s});
        return x * s;
    }
    static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
        std::vector<Tensor> saved = ctx->get_saved_variables();
        const Tensor& x = saved[0];
        const Tensor& s = saved[1];
        return {dout * (s + x * s * (1 - s))}; // forward: y = x * s
    }
};

// The same forward; the backward forgets that s depends on x.
struct WrongSwish : Function<WrongSwish> {
    static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        Tensor s = sigmoid(x);
        ctx->save_for_backward({s});
        return x * s;
    }
    static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
        return {dout * ctx->get_saved_variables()[0]}; // wrong: dy/dx = s only
    }
};

int main() {
    // float64: gradcheck's finite differences need its precision.
    Tensor x = tensor({-2.0, -0.5, 0.1, 1.0, 3.0}, kFloat64).requires_grad_();
    Tensor y = Swish::apply(x);
    sum(y).backward();
    print_values("x", x);
    print_values("swish(x)", y);
    print_values("d sum(swish(x)) / dx", x.grad());

    Tensor x0 = x.detach().clone().requires_grad_(); // a fresh leaf, without x.grad
    bool right = gradcheck([](const std::vector<Tensor>& in) { return Swish::apply(in[0]); }, {x0});
    std::cout << "gradcheck of Swish: " << (right ? "passed" : "FAILED") << "\n";
    try {
        gradcheck([](const std::vector<Tensor>& in) { return WrongSwish::apply(in[0]); }, {x0});
        std::cout << "gradcheck of WrongSwish: passed\n";
    } catch (const GradcheckError& e) {
        // It names the element and both values: analytic s, numerical s + x s (1 - s).
        std::cout << "gradcheck of WrongSwish: failed\n" << e.what() << "\n";
    }
    return 0;
}
