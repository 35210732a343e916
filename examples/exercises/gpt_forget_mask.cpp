// Exercise: forget the mask and watch the loss (docs/exercises.md). A GPT
// learns to predict token t+1 from tokens 0..t. Without the causal mask,
// position t also sees token t+1, the answer, and learns to copy it.
//
// The text here is random: every token is drawn uniformly from V = 16,
// independently of the others. Nothing in the past helps to predict the
// next token, so no honest model can beat the loss of a uniform guess,
// ln 16 = 2.77. The causal GPT stays there. The GPT without the mask falls
// far below it: a loss that beats the entropy of the data is a leak.
// Only the last position, whose answer is outside the window, stays at
// ln 16, so the leaky model can reach (1/T) ln 16 = 0.35.
//
//   build/examples/exercises/gpt_forget_mask
#include <cmath>
#include <cstdlib>

#include "exercise.h"

using namespace ember;

const int64_t V = 16, T = 8, B = 32;

// A batch of random text: y is x shifted by one (the next tokens).
static std::pair<Tensor, Tensor> random_batch() {
    Tensor data = randint(0, V, {B, T + 1});
    return {data.slice(1, 0, T), data.slice(1, 1, T + 1).contiguous()}; // gpt.py views the targets: contiguous
}

// Trains a small GPT for `steps` AdamW steps on fresh random text and
// returns its loss on 4 batches it has never seen.
static double train(bool causal, int steps) {
    manual_seed(1337);
    nn::GPTLanguageModel model({.vocab_size = V, .block_size = T, .n_embd = 32, .n_head = 4, .n_layer = 1});
    if (!causal) {
        // The exercise: forget the mask. A head hides the scores where its
        // tril buffer is 0; all ones, it hides nothing.
        for (const auto& [name, module] : model.named_modules())
            if (auto* head = dynamic_cast<nn::Head*>(module)) head->tril.fill_(1);
    }
    optim::AdamW optimizer(model.parameters(), {.lr = 1e-2});
    for (int step = 0; step < steps; ++step) {
        auto [x, y] = random_batch();
        Tensor loss = model.forward(x, y).loss;
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
    }
    NoGradGuard no_grad;
    double total = 0;
    for (int i = 0; i < 4; ++i) {
        auto [x, y] = random_batch();
        total += model.forward(x, y).loss.item();
    }
    return total / 4;
}

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
    print_value("steps", steps);
    print_value("ln V, the loss of a uniform guess", std::log(double(V)));
    print_value("val loss with the mask", train(true, steps));
    print_value("val loss without the mask", train(false, steps));
    return 0;
}
