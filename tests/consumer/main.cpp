// An outside project using an installed ember: it only sees <ember.h> and
// the library that pkg-config names. Run by tests/consumer/run.sh.
#include <cmath>
#include <iostream>

#include <ember.h>

int main() {
    using namespace ember;
    // d/dx sum(tanh(x)^2) = 2 tanh(x) (1 - tanh(x)^2)
    Tensor x = tensor({0.5, -1.0}, kFloat64).requires_grad_();
    sum(pow(tanh(x), 2)).backward();
    double t = std::tanh(0.5);
    double expected = 2 * t * (1 - t * t);
    double got = x.grad().index({0}).item();
    std::cout << "consumer: dx[0] = " << got << ", expected " << expected << "\n";
    return std::abs(got - expected) < 1e-12 ? 0 : 1;
}
