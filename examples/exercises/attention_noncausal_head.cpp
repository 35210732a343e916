// Exercise: make a head non-causal (docs/exercises.md). The lecture's Head
// masks the scores so that token t only attends to tokens 0..t: a decoder,
// which may be trained to predict token t+1. Delete the mask and the head
// becomes an encoder's (BERT's), where every token sees the whole sequence.
// Proof by experiment: change the last token, and see which outputs move;
// backpropagate from output 0, and see which inputs get a gradient.
//
//   build/examples/exercises/attention_noncausal_head
#include <cmath>
#include <iostream>

#include "exercise.h"

using namespace ember;

// nn::Head without the mask: the same three Linears, the same scale.
class EncoderHead : public nn::Module {
public:
    EncoderHead(int64_t n_embd, int64_t head_size) : Module("EncoderHead") {
        key = register_module("key", std::make_shared<nn::Linear>(n_embd, head_size, false));
        query = register_module("query", std::make_shared<nn::Linear>(n_embd, head_size, false));
        value = register_module("value", std::make_shared<nn::Linear>(n_embd, head_size, false));
    }
    // x (B,T,C) -> (B,T,hs)
    Tensor forward(const Tensor& x) override {
        Tensor k = (*key)(x), q = (*query)(x), v = (*value)(x);                   // (B,T,hs)
        Tensor wei = matmul(q, k.transpose(-2, -1)) * std::pow(k.size(-1), -0.5); // (B,T,T)
        // (the causal head's masked_fill(tril == 0, -inf) was here)
        return matmul(softmax(wei, -1), v); // (B,T,T) @ (B,T,hs) -> (B,T,hs)
    }
    std::shared_ptr<nn::Linear> key, query, value;
};

// How many of x's T positions get a gradient from output position 0.
static int64_t inputs_reaching_first_output(nn::Module& head, const Tensor& x) {
    Tensor xg = x.detach().requires_grad_();
    sum(head(xg).select(1, 0)).backward();            // out[:, 0] depends on which x[:, t]?
    Tensor reached = sum(abs(xg.grad()), {0, 2}) > 0; // (T,)
    return sum(reached).item<int64_t>();
}

int main() {
    const int64_t B = 2, T = 6, C = 8, hs = 4;
    manual_seed(7);
    nn::Head causal(C, hs, /*block_size=*/T, /*dropout=*/0.0);
    EncoderHead encoder(C, hs);
    encoder.load_state_dict(causal.state_dict(), /*strict=*/false); // the same weights (no tril buffer)

    Tensor x = randn({B, T, C});
    Tensor x2 = x.clone();
    {
        NoGradGuard no_grad;
        x2.select(1, T - 1).copy_(randn({B, C})); // a different last token
    }
    auto report = [&](const std::string& name, nn::Module& head) {
        NoGradGuard no_grad;
        Tensor change = abs(head(x2) - head(x)); // (B,T,hs)
        // Outputs 0..T-2: a causal head never looked at the last token.
        print_value(name + ": largest change of outputs 0..T-2", max(change.slice(1, 0, T - 1)).item());
        print_value(name + ": largest change of output T-1", max(change.select(1, T - 1)).item());
    };
    report("causal", causal);
    report("non-causal", encoder);
    print_value("causal: inputs reaching output 0", double(inputs_reaching_first_output(causal, x)));
    print_value("non-causal: inputs reaching output 0", double(inputs_reaching_first_output(encoder, x)));
    return 0;
}
