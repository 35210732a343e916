// attention_averaging: the "mathematical trick" behind self-attention, in the
// three versions of the "Let's build GPT" lecture (as the self-attention
// walkthrough notebook repeats them, seed 3333): each token
// becomes the mean of itself and the tokens before it, computed with loops,
// with a matrix product, and with softmax over a masked matrix of weights.
// With the notebook's seeds (3333, 1337) it prints the notebook's numbers.
// docs/attention.md, section 1, walks through this output.
//
//   build/examples/attention_averaging
#include <iostream>

#include "flags.h"
#include "notebook.h"

using namespace ember;

const char* const kAbout = "The averaging trick behind self-attention, in the lecture's three\n"
                           "versions (docs/attention.md, section 1).\n";

int main(int argc, char** argv) {
    const int stop =
        flags::threads_and_help(argc, argv, "attention_averaging", kAbout, max_num_threads(), set_num_threads);
    if (stop >= 0) return stop; // after --help, or a bad command line
    std::cout << "== 1. The averaging trick ==\n\n";
    // Row t of a lower-triangular matrix of 1s, divided by its sum, holds t+1
    // weights of 1/(t+1): multiplying by it averages the rows up to t.
    manual_seed(3333);
    Tensor b = randint(0, 10, {3, 2}).to(kFloat32);
    std::cout << "b =\n" << b << "\n";
    Tensor a = tril(ones({3, 3}));
    a = a / sum(a, 1, /*keepdim=*/true);
    std::cout << "a:\n " << a << "\n";
    Tensor c = matmul(a, b); // (3,3) @ (3,2) -> (3,2)
    std::cout << "c:\n " << c << "\n";
    std::cout << "sanity check, rows 1 and 2 by hand:\n"
              << (b[0] + b[1]) / 2 << "\n"
              << (b[0] + b[1] + b[2]) / 3 << "\n\n";

    // A toy batch: B=1 sequence of T=3 tokens with C=2 channels.
    manual_seed(1337);
    const int64_t B = 1, T = 3, C = 2;
    Tensor x = randn({B, T, C});
    std::cout << "x =\n" << x << "\n" << torch_size(x.shape()) << "\n";

    // Version 1: loops. x_new[b, t] = mean over i <= t of x[b, i].
    Tensor x_new = zeros({B, T, C});
    for (int64_t bi = 0; bi < B; ++bi)
        for (int64_t t = 0; t < T; ++t) {
            Tensor xprev = x.index({bi, Slice(0, t + 1)}); // (t+1, C)
            x_new.index({bi, t}).copy_(mean(xprev, 0));
        }
    std::cout << "version 1 (loops):\n" << x_new << "\n";

    // Version 2: one matrix product with the averaging matrix.
    Tensor wei = tril(ones({T, T}));
    wei = wei / sum(wei, 1, true);
    Tensor xnew2 = matmul(wei, x); // (T,T) @ (B,T,C) -> (B,T,C)
    std::cout << "version 2 (matmul):\n" << xnew2 << "\n";

    // Version 3: softmax. Masking the future with -inf and softmaxing gives
    // the same weights, and lets them be learned affinities instead of zeros.
    Tensor tril_mask = tril(ones({T, T}));
    Tensor w3 = zeros({T, T});
    w3 = w3.masked_fill(tril_mask == 0, -INFINITY);
    Tensor a3 = softmax(w3, 1);
    std::cout << "version 3 (softmax), weights before and after:\n" << w3 << "\n" << a3 << "\n";
    Tensor xnew3 = matmul(a3, x);
    std::cout << "version 3 result:\n" << xnew3 << "\n";
    std::cout << "all three agree: " << py_bool(allclose(x_new, xnew2) && allclose(x_new, xnew3)) << "\n";
    return 0;
}
