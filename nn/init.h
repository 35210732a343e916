// nn::init: the initialisations PyTorch's layers use, drawing from the same
// generator in the same order, so that a model built after manual_seed(s)
// has PyTorch's parameters to the bit (docs/random.md, "Initialisation").
// Each fills a parameter in place, outside the autograd graph.
// Tests: tests/test_layers.cpp.
#pragma once

#include "core/ops/ops.h"

namespace ember::nn::init {

// U(-bound, bound) with bound = gain * sqrt(3 / fan_in) and the leaky-ReLU
// gain sqrt(2 / (1 + a^2)): what nn.Linear gives its weight (with a = sqrt 5).
// fan_in is the size of dim 1 times the sizes after it.
void kaiming_uniform_(const Tensor& tensor, double a, Generator* generator = nullptr);
void uniform_(const Tensor& tensor, double from, double to, Generator* generator = nullptr);
void normal_(const Tensor& tensor, double mean = 0.0, double std = 1.0, Generator* generator = nullptr);
void zeros_(const Tensor& tensor);
void ones_(const Tensor& tensor);

// While one lives (on this thread), the functions above leave their tensor
// as it is and draw nothing: a model built under it keeps its tensors as
// allocated, for weights that are loaded next (nn::fast::from_pretrained).
// Building GPT-2 124M draws 3 x 124 M random numbers otherwise (about ten
// seconds). Like transformers' no_init_weights.
class NoInitGuard {
public:
    NoInitGuard();
    ~NoInitGuard();
    NoInitGuard(const NoInitGuard&) = delete;
    NoInitGuard& operator=(const NoInitGuard&) = delete;
    static bool active();

private:
    bool previous_;
};

// Dim 1 times the trailing dims (fan_in), and dim 0 times them (fan_out).
int64_t fan_in(const Tensor& tensor);

} // namespace ember::nn::init
