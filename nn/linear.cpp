// nn::Linear: see linear.h. Tests: tests/test_layers.cpp.
#include "nn/linear.h"

#include <cmath>

#include "nn/init.h"

namespace ember::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : Module("Linear"), in_features(in), out_features(out) {
    if (in < 0 || out < 0) fail<ValueError>("Linear", "features must be non-negative, got in=", in, ", out=", out);
    weight = register_parameter("weight", empty({out, in}));
    if (with_bias) bias = register_parameter("bias", empty({out}));
    reset_parameters();
}

void Linear::reset_parameters() {
    // torch.nn.Linear.reset_parameters, draw for draw.
    init::kaiming_uniform_(weight, std::sqrt(5.0));
    if (bias.defined()) {
        double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
        init::uniform_(bias, -bound, bound);
    }
}

Tensor Linear::forward(const Tensor& x) {
    if (x.dim() == 0 || x.size(-1) != in_features)
        fail<ShapeError>("Linear", "input of shape ", x.shape(), " does not end in in_features=", in_features,
                         " (weight ", weight.shape(), ")");
    // x (..., in) @ W^T (in, out) + bias -> (..., out), as PyTorch's
    // F.linear: one (N, in) @ (in, out) product over x's leading dims, the
    // transposed weight read in place, the bias added where the product lies.
    return linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
    return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
           ", bias=" + (bias.defined() ? "True" : "False");
}

} // namespace ember::nn
