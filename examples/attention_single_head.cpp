// attention_single_head: one head of self-attention, as the "Let's build GPT"
// lecture builds it (seed 1337) and as the self-attention walkthrough
// notebook repeats it (seed 3333):
// queries and keys make data-dependent affinities, a causal mask hides the
// future, softmax turns affinities into weights, and the weights average the
// values. Then why the scores are scaled by head_size^-0.5, and the nn::Head
// layer that packages it all. Prints the notebooks' numbers.
// docs/attention.md, section 2, walks through this output.
//
//   build/examples/attention_single_head
#include <iostream>

#include "flags.h"
#include "notebook.h"

using namespace ember;

const char* const kAbout = "One head of self-attention, as the lecture builds it\n"
                           "(docs/attention.md, section 2).\n";

int main(int argc, char** argv) {
    const int stop =
        flags::threads_and_help(argc, argv, "attention_single_head", kAbout, max_num_threads(), set_num_threads);
    if (stop >= 0) return stop; // after --help, or a bad command line
    std::cout << "== 2. One head ==\n\n";
    manual_seed(1337);
    const int64_t B = 4, T = 8, C = 32, head_size = 16;
    Tensor x = randn({B, T, C});

    // Every token emits a query ("what am I looking for?") and a key ("what do I contain?").
    nn::Linear key(C, head_size, false), query(C, head_size, false), value(C, head_size, false);
    Tensor k = key(x);   // (B,T,16)
    Tensor q = query(x); // (B,T,16)
    // Affinities: (B,T,16) @ (B,16,T) -> (B,T,T), then no peeking at the future.
    Tensor wei = matmul(q, k.transpose(-2, -1));
    Tensor tril_mask = tril(ones({T, T}));
    wei = wei.masked_fill(tril_mask == 0, -INFINITY);
    wei = softmax(wei, -1);
    Tensor v = value(x);
    Tensor out = matmul(wei, v); // (B,T,T) @ (B,T,16) -> (B,T,16)
    std::cout << torch_size(out.shape()) << "\n";
    std::cout << "wei[0] =\n" << wei[0] << "\n\n";

    // Why scale: with unit-variance q and k, q.k sums head_size products, so
    // its variance is head_size; times head_size^-0.5 it is 1 again, and
    // softmax stays diffuse instead of collapsing onto the largest score.
    std::cout << "-- Scaling --\n";
    Tensor k2 = randn({B, T, head_size});
    Tensor q2 = randn({B, T, head_size});
    Tensor scaled = matmul(q2, k2.transpose(-2, -1)) * std::pow(double(head_size), -0.5);
    std::cout << "k.var() = " << k2.var() << "\nq.var() = " << q2.var() << "\nwei.var() = " << scaled.var() << "\n";
    Tensor logits = tensor({0.1f, -0.2f, 0.3f, -0.2f, 0.5f});
    std::cout << "softmax(logits) = " << softmax(logits, -1) << "\n";
    std::cout << "softmax(logits * 8) = " << softmax(logits * 8, -1) << "  (too sharp: nearly one-hot)\n\n";

    // The walkthrough's single head (seed 3333, unscaled as the notebook has it).
    manual_seed(3333);
    Tensor x3 = randn({4, 8, 32});
    nn::Linear key3(32, 16, false), query3(32, 16, false), value3(32, 16, false);
    Tensor wei3 = matmul(query3(x3), key3(x3).transpose(-2, -1));
    wei3 = softmax(wei3.masked_fill(tril(ones({8, 8})) == 0, -INFINITY), -1);
    Tensor out3 = matmul(wei3, value3(x3));
    std::cout << "the self-attention walkthrough, seed 3333: " << torch_size(out3.shape()) << " "
              << torch_size(wei3.shape()) << "\n\n";

    // The layer: nn::Head(n_embd, head_size, block_size, dropout), scaled.
    manual_seed(1337);
    Tensor xh = randn({B, T, C});
    nn::Head head(C, head_size, /*block_size=*/T, /*dropout=*/0.0);
    // The layer keeps nothing for pictures: its weights are the input of its
    // dropout, which a forward hook sees (PyTorch's register_forward_hook).
    Tensor weights;
    head.dropout->register_forward_hook(
        [&](nn::Module&, const Tensor& input, const Tensor&) { weights = input.detach(); });
    Tensor outh = head(xh);
    std::cout << "nn::Head: " << torch_size(outh.shape()) << "\nits weights for sequence 0 =\n" << weights[0] << "\n";
    return 0;
}
