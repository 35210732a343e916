// gradcheck: are an op's gradients right? Compares the Jacobian autograd
// computes with one from central finite differences, entry by entry, in
// float64, and throws GradcheckError naming the input, the element and both
// values on a mismatch. docs/autograd.md, "Checking gradients"; tests:
// tests/test_gradcheck.cpp.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor/tensor.h"

//   bool ok = gradcheck([](const std::vector<Tensor>& in) { return my_op(in[0], in[1]); },
//                       {randn({3, 4}, kFloat64).requires_grad_(), randn({4}, kFloat64)});
//
// Every input that requires grad is checked (and, with the second form, every
// parameter); it must be float64 (float32 finite differences are too coarse
// to tell a small error from rounding). Analytic: one backward per output
// element. Numerical: for each input element, (f(x + eps) - f(x - eps)) / 2
// eps. They must agree within atol + rtol * |numerical| everywhere, which
// catches a gradient that is off by a factor of two, transposed, or missing a
// term (or gradcheck returns false when raise_exception is off).

namespace ember {

class GradcheckError : public Error {
public:
    using Error::Error;
};

struct GradcheckOptions {
    double eps = 1e-6;
    double atol = 1e-5;
    double rtol = 1e-3;
    bool raise_exception = true;
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions options = {});

// The same, and also with respect to `parameters`: tensors fn uses directly
// (a layer's parameters, after module.to(kFloat64)), not through its inputs.
// They are nudged in place and restored, and their .grad is left as it was.
//   gradcheck([&](const std::vector<Tensor>& in) { return layer(in[0]); }, {x}, layer.parameters());
bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& parameters,
               GradcheckOptions options = {});

} // namespace ember
