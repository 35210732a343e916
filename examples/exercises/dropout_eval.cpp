// Exercise: forget eval() (docs/exercises.md, docs/training.md). Dropout
// zeroes each activation with probability p while training and scales the
// survivors by 1/(1-p), so that every activation keeps its mean. At
// evaluation it must do nothing: model.eval() switches it off. Forget it,
// and the model's answers (and its val loss) change from call to call.
//
//   build/examples/exercises/dropout_eval
#include <cmath>

#include "exercise.h"

using namespace ember;

int main() {
    manual_seed(1337);
    // Dropout alone, p = 0.2, on 100,000 ones.
    Tensor x = ones({100000});
    Tensor y = dropout(x, 0.2, /*training=*/true);
    print_value("fraction zeroed", mean((y == 0).to(kFloat32)).item()); // about p
    print_value("largest kept value", max(y).item());                   // 1 / (1 - p)
    print_value("mean after dropout", mean(y).item());                  // about 1

    // A GPT with the lecture's dropout 0.2, asked twice about the same text.
    nn::GPTLanguageModel model(
        {.vocab_size = 65, .block_size = 8, .n_embd = 32, .n_head = 4, .n_layer = 2, .dropout = 0.2});
    Tensor idx = randint(0, 65, {4, 8}), targets = randint(0, 65, {4, 8});
    NoGradGuard no_grad;
    // A fresh module is in training mode, as in PyTorch.
    double first = model.forward(idx, targets).loss.item();
    double second = model.forward(idx, targets).loss.item();
    print_value("loss twice in training mode, difference", std::abs(first - second));
    model.eval();
    first = model.forward(idx, targets).loss.item();
    second = model.forward(idx, targets).loss.item();
    print_value("loss twice after eval(), difference", std::abs(first - second));
    return 0;
}
