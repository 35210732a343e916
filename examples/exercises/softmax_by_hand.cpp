// Exercise: softmax by hand, and the loss of a guess (docs/exercises.md,
// docs/softmax.md). softmax(x)_i = exp(x_i) / sum_j exp(x_j). Written just
// so, it breaks for large x: in float32, exp(x) is inf from x = 88.73 up,
// and inf / inf is nan. Softmax does not change when a constant is added
// to every x_i, so subtracting the row's max first keeps every exp in
// [0, 1], which is what ember's softmax (and PyTorch's) does.
// Then cross-entropy: a model that spreads its bets evenly over V classes
// pays ln V on every token; a confident right guess pays almost nothing and
// a confident wrong guess pays for its confidence.
//
//   build/examples/exercises/softmax_by_hand
#include "exercise.h"

using namespace ember;

static Tensor naive_softmax(const Tensor& x) { return exp(x) / sum(exp(x), -1, true); }

static Tensor stable_softmax(const Tensor& x) {
    Tensor shifted = x - x.max(-1, /*keepdim=*/true).values; // every entry <= 0
    return exp(shifted) / sum(exp(shifted), -1, true);
}

int main() {
    Tensor x = tensor({1.0f, 2.0f, 3.0f});
    print_values("naive softmax of [1, 2, 3]", naive_softmax(x));
    print_values("softmax of [1, 2, 3]", softmax(x, -1));
    print_values("naive softmax of [101, 102, 103]", naive_softmax(x + 100));
    print_values("stable softmax of [101, 102, 103]", stable_softmax(x + 100));
    print_values("softmax of [101, 102, 103]", softmax(x + 100, -1));

    // Cross-entropy over V = 65 characters, the lecture's vocabulary.
    const int64_t V = 65;
    Tensor targets = tensor({7, 0, 64, 30});                                              // 4 tokens
    print_value("loss of a uniform guess", cross_entropy(zeros({4, V}), targets).item()); // ln 65
    // A logit of 10 on one class, 0 on the others: that class gets
    // e^10 / (e^10 + 64) = 0.9971, each other one 1 / (e^10 + 64).
    Tensor right = zeros({4, V}), wrong = zeros({4, V});
    for (int64_t i = 0; i < 4; ++i) {
        int64_t t = targets[i].item<int64_t>();
        right[i][t].fill_(10.0);           // on the target
        wrong[i][(t + 1) % V].fill_(10.0); // on another class
    }
    print_value("loss of a confident right guess", cross_entropy(right, targets).item()); // ln(1 + 64 e^-10)
    print_value("loss of a confident wrong guess", cross_entropy(wrong, targets).item()); // ln(e^10 + 64)
    return 0;
}
