// Exercise: remove the attention scale and measure the variance
// (docs/exercises.md). The lecture scales the scores q k^T by 1/sqrt(hs):
// with q and k of unit variance, each score is a sum of hs products of unit
// variance, so its variance is hs; the scale brings it back to 1. Without
// it, softmax sees large numbers and turns into a one-hot: each token then
// listens to a single other token, and the gradients through the others vanish.
//
//   build/examples/exercises/attention_scale
#include <cmath>

#include "exercise.h"

using namespace ember;

int main() {
    manual_seed(1337);
    const int64_t B = 16, T = 64, hs = 16; // the lecture's head_size; 16 * 64 * 64 = 65,536 scores
    Tensor q = randn({B, T, hs}), k = randn({B, T, hs});

    Tensor unscaled = matmul(q, k.transpose(-2, -1));                    // (B,T,T)
    Tensor scaled = matmul(q, k.transpose(-2, -1)) * std::pow(hs, -0.5); // the lecture's line
    print_value("head_size", double(hs));
    print_value("var(q)", q.var().item());
    print_value("var(k)", k.var().item());
    print_value("var(q k^T) without the scale", unscaled.var().item()); // about hs = 16
    print_value("var(q k^T) with the scale", scaled.var().item());      // about 1

    // What the scale protects: softmax of large scores is nearly one-hot.
    // The mean of each row's largest weight: 1/T would be uniform, 1 one-hot.
    print_value("mean largest softmax weight without the scale", softmax(unscaled, -1).max(-1).values.mean().item());
    print_value("mean largest softmax weight with the scale", softmax(scaled, -1).max(-1).values.mean().item());
    // The lecture's own example: softmax of [0.1, -0.2, 0.3, -0.2, 0.5], then of 8 times it.
    Tensor s = tensor({0.1f, -0.2f, 0.3f, -0.2f, 0.5f});
    print_values("softmax(s)", softmax(s, -1));
    print_values("softmax(8 s)", softmax(s * 8, -1));
    return 0;
}
