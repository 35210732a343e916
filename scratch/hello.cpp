// Your first program against ember: copy this file to a new name in this
// folder (say mine.cpp), run `ninja -C build`, then build/scratch/mine.
#include "ember.h"

#include <iostream>

using namespace ember;

int main() {
    manual_seed(1337);
    Tensor x = randn({2, 3}).requires_grad_();
    Tensor loss = (x * x).sum();
    loss.backward();
    std::cout << "x:\n" << x << "\n";
    std::cout << "d(sum of x^2)/dx = 2x:\n" << x.grad() << "\n";
    std::cout << "x.sizes() = " << x.sizes() << "\n";
}
