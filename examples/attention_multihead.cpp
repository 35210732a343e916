// attention_multihead: several heads side by side, as the "Multi-Headed
// Attention" notebook builds them with the lecture's classes (seed 1337):
// each head attends in its own head_size-dimensional space, the outputs are
// concatenated back to C channels and projected. nn::MultiHeadAttention does the same thing.
// Prints the same numbers as the notebook's code run in PyTorch.
// docs/attention.md, section 3.
//
//   build/examples/attention_multihead
#include <iostream>

#include "flags.h"
#include "notebook.h"

using namespace ember;

const char* const kAbout = "Several heads side by side, with the lecture's classes\n"
                           "(docs/attention.md, section 3).\n";

int main(int argc, char** argv) {
    const int stop =
        flags::threads_and_help(argc, argv, "attention_multihead", kAbout, max_num_threads(), set_num_threads);
    if (stop >= 0) return stop; // after --help, or a bad command line
    std::cout << "== 3. Several heads side by side ==\n\n";
    manual_seed(1337);
    const int64_t B = 4, T = 8, C = 32, head_size = 8, num_heads = 4;
    Tensor x = randn({B, T, C});

    // The notebook: heads = ModuleList([Head(head_size) for _ in range(num_heads)]),
    // proj = Linear(C, C). nn::MultiHeadAttention registers the same modules
    // in the same order, so it draws the same weights.
    nn::MultiHeadAttention mha(num_heads, head_size, C, /*block_size=*/T, /*dropout=*/0.0);
    std::vector<Tensor> outs;
    for (size_t h = 0; h < mha.heads->size(); ++h) outs.push_back((*mha.heads)[h]->forward(x)); // 4 x (B,T,8)
    Tensor out = cat(outs, -1);   // (B,T,32): the heads' channels side by side
    out = mha.proj->forward(out); // (B,T,C)
    std::cout << torch_size(out.shape()) << "\nout[0, :2] =\n" << out[0].slice(0, 0, 2) << "\n";
    std::cout << "the layer gives the same: " << py_bool(allclose(mha(x), out)) << "\n\n";
    std::cout << mha << "\n";
    std::cout << "parameters: " << mha.num_parameters() << "\n";
    return 0;
}
