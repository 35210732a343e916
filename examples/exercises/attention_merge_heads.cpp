// Exercise: reshape without the transpose (docs/exercises.md). Batched
// attention computes every head at once, as out (B,NH,T,hs). To give each
// token its heads side by side, (B,T,NH*hs) as cat(heads, -1) would, the
// head dim must first move next to the channels: out.transpose(1, 2), then
// reshape. reshape alone reads (B,NH,T,hs) in memory order and fills a
// token's row with the rows of one head at other positions: the shape is
// right, the numbers are in the wrong places.
//
//   build/examples/exercises/attention_merge_heads
#include <cmath>
#include <iostream>

#include "exercise.h"

using namespace ember;

int main() {
    // Numbers that say where they come from: out[0][h][t] = [6h+2t, 6h+2t+1].
    const int64_t NH = 2, T = 3, hs = 2;
    Tensor out = arange(NH * T * hs).view({1, NH, T, hs}).to(kFloat32); // (B,NH,T,hs)
    Tensor right = out.transpose(1, 2).reshape({1, T, NH * hs});        // (B,T,C)
    Tensor wrong = out.reshape({1, T, NH * hs});                        // (B,T,C), heads mixed
    std::cout << "heads (1,2,3,2):\n"
              << out << "\nout.transpose(1, 2).reshape(1, 3, 4):\n"
              << right << "\nout.reshape(1, 3, 4):\n"
              << wrong << "\n";
    print_values("merged with the transpose", right);
    print_values("merged without the transpose", wrong);

    // With attention: two causal heads from one batched computation, against
    // the same heads concatenated one by one (what a list of Heads returns).
    manual_seed(42);
    const int64_t B = 2, T2 = 4, NH2 = 2, hs2 = 4;
    Tensor q = randn({B, NH2, T2, hs2}), k = randn({B, NH2, T2, hs2}), v = randn({B, NH2, T2, hs2});
    Tensor att = matmul(q, k.transpose(-2, -1)) * std::pow(hs2, -0.5); // (B,NH,T,T)
    att = softmax(att.masked_fill(tril(ones({T2, T2})) == 0, -INFINITY), -1);
    Tensor heads = matmul(att, v);                                     // (B,NH,T,hs)
    Tensor concat = cat({heads.select(1, 0), heads.select(1, 1)}, -1); // (B,T,NH*hs)
    Tensor with_transpose = heads.transpose(1, 2).reshape({B, T2, NH2 * hs2});
    Tensor without = heads.reshape({B, T2, NH2 * hs2});
    std::cout << "cat(heads) == transpose, reshape: " << py_bool(allclose(concat, with_transpose)) << "\n";
    std::cout << "cat(heads) == reshape alone: " << py_bool(allclose(concat, without)) << "\n";
    print_value("largest difference with the transpose", max(abs(concat - with_transpose)).item());
    print_value("largest difference without it", max(abs(concat - without)).item());
    // Without the transpose, slot j of token t holds element t*NH + j of the
    // (NH,T) grid of head outputs, that is head (t*NH + j) / T at time
    // (t*NH + j) % T. It is the right one, head j at time t, only where
    // t (NH-1) = j (T-1): token 0's head 0 and token 3's head 1, 2 slots of
    // hs = 4 numbers in each of B = 2 sequences: 16 of 64.
    print_value("positions right without the transpose", sum(concat == without).item());
    return 0;
}
