// Exercise: gradients accumulate (docs/exercises.md, docs/autograd.md).
// backward() adds into .grad; it never overwrites it. That is what lets a
// tensor used twice in one expression get both contributions, and why every
// training step calls zero_grad() first. Forget it, and each step follows
// the sum of every gradient so far.
//
//   build/examples/exercises/autograd_accumulate
#include "exercise.h"

using namespace ember;

int main() {
    Tensor x = tensor({1.0f, -2.0f, 3.0f}).requires_grad_();
    // loss = sum(x^2): d loss / dx = 2x.
    sum(x * x).backward();
    print_values("x.grad after one backward", x.grad()); // 2x
    sum(x * x).backward();
    print_values("x.grad after two", x.grad()); // 2x + 2x
    x.zero_grad();
    sum(x * x).backward();
    print_values("x.grad after zero_grad and one more", x.grad()); // 2x again

    // Used twice in one expression: both uses add up (x * x is the same as x^2).
    Tensor a = tensor({3.0f}).requires_grad_();
    Tensor y = a * a + a; // dy/da = 2a + 1
    y.backward();
    print_values("d(a*a + a)/da at a = 3", a.grad());

    // Gradient descent on loss = (w - 5)^2 from w = 0, lr 0.1: with
    // zero_grad w walks to 5; without it the stale gradients pile up and w
    // overshoots and oscillates.
    for (bool zero : {true, false}) {
        Tensor w = zeros({1}).requires_grad_();
        for (int step = 0; step < 20; ++step) {
            if (zero) w.zero_grad();
            pow(w - 5, 2).sum().backward();
            NoGradGuard no_grad;
            w.sub_(w.grad() * 0.1);
        }
        print_value(zero ? "w after 20 steps with zero_grad" : "w after 20 steps without", w.item());
    }
    return 0;
}
