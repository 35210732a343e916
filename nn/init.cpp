// nn::init: see init.h. Each function computes its bound in double exactly as
// torch/nn/init.py does, then draws with the same kernel PyTorch would.
// Tests: tests/test_layers.cpp.
#include "nn/init.h"

#include <cmath>

#include "core/autograd/autograd.h"

namespace ember::nn::init {

namespace {
thread_local bool no_init = false;
} // namespace

NoInitGuard::NoInitGuard() : previous_(no_init) { no_init = true; }
NoInitGuard::~NoInitGuard() { no_init = previous_; }
bool NoInitGuard::active() { return no_init; }

int64_t fan_in(const Tensor& tensor) {
    if (tensor.dim() < 2)
        fail<ShapeError>("init", "fan in and fan out need a tensor with at least 2 dims, got ", tensor.shape());
    int64_t receptive = 1;
    for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.shape()[d];
    return tensor.shape()[1] * receptive;
}

void kaiming_uniform_(const Tensor& tensor, double a, Generator* generator) {
    if (tensor.numel() == 0) return;                    // PyTorch: nothing to draw (and fan_in may be 0)
    const double gain = std::sqrt(2.0 / (1.0 + a * a)); // calculate_gain('leaky_relu', a)
    const double std = gain / std::sqrt(static_cast<double>(fan_in(tensor)));
    const double bound = std::sqrt(3.0) * std;
    uniform_(tensor, -bound, bound, generator);
}

void uniform_(const Tensor& tensor, double from, double to, Generator* generator) {
    if (no_init) return;
    NoGradGuard no_grad;
    Tensor t = tensor;
    t.uniform_(from, to, generator);
}

void normal_(const Tensor& tensor, double mean, double std, Generator* generator) {
    if (no_init) return;
    NoGradGuard no_grad;
    Tensor t = tensor;
    t.normal_(mean, std, generator);
}

void zeros_(const Tensor& tensor) {
    if (no_init) return;
    NoGradGuard no_grad;
    Tensor t = tensor;
    t.zero_();
}

void ones_(const Tensor& tensor) {
    if (no_init) return;
    NoGradGuard no_grad;
    Tensor t = tensor;
    t.fill_(1);
}

} // namespace ember::nn::init
