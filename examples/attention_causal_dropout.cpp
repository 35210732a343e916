// attention_causal_dropout: causal multi-head attention with dropout, from
// Raschka's "Build a Large Language Model (From Scratch)", ch. 3 (also the
// self-attention walkthrough's last class). Dropout draws the same masks as
// PyTorch for the same seed (a PyTorch build without MKL, docs/random.md),
// so the book's printed matrices come out the same; the batched class masks the future with a
// triu buffer and drops attention weights while training.
// docs/attention.md, section 5.
//
//   build/examples/attention_causal_dropout
#include <iostream>

#include "flags.h"
#include "notebook.h"

using namespace ember;

const char* const kAbout = "Causal multi-head attention with dropout, Raschka's chapter 3\n"
                           "(docs/attention.md, section 5).\n";

int main(int argc, char** argv) {
    const int stop =
        flags::threads_and_help(argc, argv, "attention_causal_dropout", kAbout, max_num_threads(), set_num_threads);
    if (stop >= 0) return stop; // after --help, or a bad command line
    std::cout << "== 5. Causal attention with dropout ==\n\n";
    // The book's dropout demo: half the entries zeroed, the rest doubled.
    manual_seed(123);
    nn::Dropout dropout(0.5);
    Tensor example = ones({6, 6});
    std::cout << dropout(example) << "\n\n";

    // "Your journey starts with one step": six tokens, three channels each.
    Tensor inputs = tensor({{0.43f, 0.15f, 0.89f},
                            {0.55f, 0.87f, 0.66f},
                            {0.57f, 0.85f, 0.64f},
                            {0.22f, 0.58f, 0.33f},
                            {0.77f, 0.25f, 0.10f},
                            {0.05f, 0.80f, 0.55f}});
    Tensor batch = stack({inputs, inputs}); // (2,6,3)
    std::cout << torch_size(batch.shape()) << "\n";

    manual_seed(123);
    const int64_t context_length = batch.size(1), d_in = 3, d_out = 2;
    nn::BatchedMultiHeadAttention mha(d_in, d_out, context_length, 0.0, /*num_heads=*/2);
    Tensor context_vecs = mha(batch);
    std::cout << context_vecs << "\ncontext_vecs.shape: " << torch_size(context_vecs.shape()) << "\n\n";

    // The mask: 1 above the diagonal marks what each token may not see.
    std::cout << triu(ones({3, 3}), 1) << "\n";

    // The walkthrough's test of the class, with dropout on the attention weights.
    manual_seed(3333);
    const int64_t B = 4, T = 8, C = 32;
    Tensor x = randn({B, T, C});
    nn::BatchedMultiHeadAttention attn(C, C, T, 0.1, 4);
    // The weights, as the dropout hands them on: a forward hook sees its output.
    Tensor weights; // (B,NH,T,T)
    attn.dropout->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) { weights = out.detach(); });
    std::cout << torch_size(attn(x).shape()) << "\n";
    // In training mode some weights were dropped (and the rest scaled by 1/0.9).
    std::cout << "weights of sequence 0, head 0, in training:\n" << weights[0][0] << "\n";
    attn.eval();
    attn(x);
    std::cout << "in eval mode, rows sum to 1 again:\n" << sum(weights[0][0], -1) << "\n";
    return 0;
}
