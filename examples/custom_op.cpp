// custom_op: a new differentiable op written outside the library, proven
// right with gradcheck. docs/extending.md walks through it.
//
// The op is the "swish" (SiLU) activation, y = x * sigmoid(x). Its backward,
// by the product rule with s = sigmoid(x) and s' = s (1 - s):
//   dy/dx = s + x s (1 - s)
//
//   build/examples/custom_op        (exits with 1 if the gradient check fails)
#include <cstdio>
#include <iostream>

#include <ember.h>

#include "flags.h"

using namespace ember;

struct Swish : Function<Swish> {
    static std::string name() { return "SwishBackward"; }

    static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        Tensor s = sigmoid(x);
        ctx->save_for_backward({x, s}); // saved under their math names
        return x * s;
    }

    static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
        std::vector<Tensor> saved = ctx->get_saved_variables();
        const Tensor& x = saved[0];
        const Tensor& s = saved[1];
        // forward: y = x * s, so dx = dout * (s + x s (1 - s))
        return {dout * (s + x * s * (1 - s))};
    }
};

const char* const kAbout = "A new differentiable op (swish) written outside the library, proven\n"
                           "right with gradcheck (docs/extending.md).\n";

int main(int argc, char** argv) {
    const int stop = flags::threads_and_help(argc, argv, "custom_op", kAbout, max_num_threads(), set_num_threads);
    if (stop >= 0) return stop; // after --help, or a bad command line
    Tensor x = tensor({-2.0f, -0.5f, 0.0f, 1.0f, 3.0f}).requires_grad_();
    Tensor y = Swish::apply(x);
    sum(y).backward();
    std::cout << "x       = " << x.detach() << "\n";
    std::cout << "swish x = " << y << "\n";
    std::cout << "dy/dx   = " << x.grad() << "\n";

    // gradcheck compares backward with finite differences, in float64.
    Tensor x64 = tensor({-2.0, -0.5, 0.1, 1.0, 3.0}, kFloat64).requires_grad_();
    bool ok = gradcheck([](const std::vector<Tensor>& in) { return Swish::apply(in[0]); }, {x64});
    std::printf("gradcheck: %s\n", ok ? "passed" : "FAILED");
    return ok ? 0 : 1;
}
