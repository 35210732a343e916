// nn::Linear: y = x @ W^T + b, as nn.Linear.
//
// weight is (out_features, in_features) and bias (out_features), initialised
// exactly as PyTorch does for the same seed: weight ~ U(±sqrt(1/in)) through
// kaiming_uniform_(a = sqrt 5), then bias ~ U(±1/sqrt(in)), drawn in that
// order. x may have any number of leading dims: (B,T,in) -> (B,T,out).
// Tests: tests/test_layers.cpp.
#pragma once

#include "nn/module.h"

namespace ember::nn {

class Linear : public Module {
public:
    Linear(int64_t in_features, int64_t out_features, bool bias = true);
    // x (..., in) @ weight^T (in, out) + bias -> (..., out)
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    // Redraws the parameters as the constructor did.
    void reset_parameters();

    const int64_t in_features, out_features;
    Tensor weight; // (out_features, in_features)
    Tensor bias;   // (out_features), or undefined without bias
};

} // namespace ember::nn
