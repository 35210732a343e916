// Exercise: the gradient of a broadcast is a sum (docs/exercises.md,
// docs/tensor.md). x (4,3) + b (3,) adds b to each of x's 4 rows: b is
// used 4 times, so its gradient is the sum of the 4 rows' gradients. The
// same holds for every broadcast dim: a (4,1) column added to (4,3) gets
// the sum over the 3 columns. Autograd does it with sum_to, which reduces a
// gradient back to the input's shape.
//
//   build/examples/exercises/broadcast_gradient
#include "exercise.h"

using namespace ember;

int main() {
    manual_seed(0);
    Tensor x = randn({4, 3}).requires_grad_();
    Tensor b = zeros({3}).requires_grad_();      // a bias per column
    Tensor col = zeros({4, 1}).requires_grad_(); // one number per row
    Tensor c = randn({4, 3});                    // d loss / d y: weights of the loss

    Tensor y = x + b + col; // (4,3) + (3,) + (4,1) -> (4,3)
    sum(y * c).backward();  // so d loss / d y = c
    print_values("c (4,3), the gradient reaching y", c);
    print_values("x.grad (4,3)", x.grad());          // c itself
    print_values("b.grad (3,)", b.grad());           // c summed over the 4 rows
    print_values("col.grad (4,1)", col.grad());      // c summed over the 3 columns
    print_values("sum_to(c, (3,))", sum_to(c, {3})); // what autograd called
    return 0;
}
