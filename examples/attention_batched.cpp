// attention_batched: all heads in one batched matmul, as the "Multiple
// headers" and "Implementing Multi-head Attention" notebooks build it. The
// first one's experiments (seed 123) show that stacking heads into a batch
// dim computes the same thing as a loop over heads, how to index one head,
// and which reshape is right when merging them back; the second one's
// classes project Q, K, V with three Linears or with one fused Linear split
// by chunk. Finally the list of
// heads and the batched form agree when given the same weights.
// docs/attention.md, section 4.
//
//   build/examples/attention_batched
#include <iostream>

#include "flags.h"
#include "notebook.h"

using namespace ember;

// "Multiple headers"' head(): causal attention over (..., T, C) inputs.
static Tensor head(const Tensor& q, const Tensor& k, const Tensor& v) {
    const int64_t T = q.size(-2), C = q.size(-1);
    Tensor att = matmul(q, k.transpose(-2, -1)) / std::pow(double(C), 0.5); // (..., T, T)
    att = att.masked_fill(tril(ones({T, T})) == 0, -INFINITY);
    att = softmax(att, -1);
    return matmul(att, v); // (..., T, C)
}

const char* const kAbout = "All heads in one batched matmul (docs/attention.md, section 4).\n";

int main(int argc, char** argv) {
    const int stop =
        flags::threads_and_help(argc, argv, "attention_batched", kAbout, max_num_threads(), set_num_threads);
    if (stop >= 0) return stop; // after --help, or a bad command line
    std::cout << "== 4. All heads in one batched matmul ==\n\n";
    std::cout << "-- One causal head on a batch (B=2, T=4, C=8) --\n";
    manual_seed(123);
    const int64_t B = 2, T = 4, C = 8;
    Tensor q = randn({B, T, C}), k = randn({B, T, C}), v = randn({B, T, C});
    Tensor out = head(q, k, v);
    std::cout << "v[0] =\n" << v[0] << "\nout[0] =\n" << out[0] << "\n";
    // Row 0 attends only to itself; row 1 is a blend of value rows 0 and 1.
    std::cout << "row 0 of out[0] equals row 0 of v[0] (token 0 sees only itself): "
              << py_bool(allclose(v[0][0], out[0][0])) << "\n";
    std::cout << "row 1 of out[0] is 0.7818 v[0][0] + 0.2182 v[0][1] (its two weights): "
              << py_bool(allclose(v[0][0] * 0.7818 + v[0][1] * 0.2182, out[0][1], 1e-5, 1e-2)) << "\n\n";

    // Two heads computed one by one and concatenated...
    Tensor q1 = randn({B, T, C}), q2 = randn({B, T, C});
    Tensor k1 = randn({B, T, C}), k2 = randn({B, T, C});
    Tensor v1 = randn({B, T, C}), v2 = randn({B, T, C});
    Tensor heads = cat({head(q1, k1, v1), head(q2, k2, v2)}, -1); // (B,T,2C)
    // ...and a batched matmul multiplies matching pairs along the leading dims.
    std::cout << "-- A batched matmul multiplies matching pairs along the leading dims --\n";
    Tensor a = arange(B * T * C * 2).view({2, B, T, C}).to(kFloat32);
    Tensor b = ones({2, B, T, C});
    Tensor c = matmul(a, b.transpose(-1, -2)); // (2,B,T,T)
    Tensor c_stack = stack({matmul(a[0], b[0].transpose(-1, -2)), matmul(a[1], b[1].transpose(-1, -2))});
    std::cout << "two (B,T,C) @ (B,C,T) products, stacked: (2,B,T,T) =\n" << c_stack << "\n";
    std::cout << "one matmul of (2,B,T,C) @ (2,B,C,T) gives the same: " << py_bool(allclose(c, c_stack)) << "\n\n";

    // So the heads can go in a dim of their own: (B, 2, T, C), one call.
    std::cout << "-- Stacking heads, and indexing them --\n";
    Tensor qs = stack({q1, q2}, 1), ks = stack({k1, k2}, 1), vs = stack({v1, v2}, 1);
    Tensor heads2 = head(qs, ks, vs); // (B,2,T,C)
    // heads2 is (B,2,T,C): heads2[1] is batch element 1, not head 1, which is
    // why the notebook's comparison prints False; head 1 is heads2[:, 1].
    Tensor head0 = heads.index({Slice(), Slice(), Slice(0, C)});    // (B,T,C)
    Tensor head1 = heads.index({Slice(), Slice(), Slice(C, None)}); // (B,T,C)
    std::cout << "head 0 of the batched result, heads2[:, 0], equals the first head computed alone: "
              << py_bool(allclose(head0, heads2.select(1, 0))) << "\n";
    std::cout << "heads2[1] is head 1? " << py_bool(allclose(head1, heads2[1])) << "\n";
    std::cout << "heads2[:, 1] is head 1? " << py_bool(allclose(head1, heads2.select(1, 1))) << "\n";
    // Merging heads: move the head dim next to the channels first. Without the
    // transpose, reshape reads (B,2,T,C) in memory order: rows of one head land
    // where the channels of one token belong.
    std::cout << "transpose, then reshape: " << py_bool(allclose(heads, heads2.transpose(1, 2).reshape({B, T, 2 * C})))
              << "\n";
    std::cout << "reshape without the transpose: " << py_bool(allclose(heads, heads2.reshape({B, T, 2 * C}))) << "\n";
    Tensor x = stack({ones({B * T * C}).view({B, T, C}), ones({B * T * C}).view({B, T, C}) * 2.0}, 1);
    std::cout << "two heads of 1s and 2s, merged: each token's row holds head 0's " << C << " channels, then head 1's\n"
              << x.transpose(1, 2).reshape({B, T, C * 2}) << "\n\n";

    // "Implementing Multi-head Attention": Q, K, V and O as Linears with bias,
    // no causal mask (nn::QKVAttention); and V2, one fused qkv Linear laid
    // out per head and split with chunk (nn::FusedQKVAttention).
    std::cout << "-- Implementing Multi-head Attention: Q, K, V and O as Linears --\n";
    manual_seed(0); // the notebook sets no seed here; ember fixes one
    const int64_t vocab_size = 15, d_model = 12, seq_len = 5, n_head = 3;
    Tensor tokens = randint(0, vocab_size, {2, seq_len});
    nn::Embedding embedding(vocab_size, d_model);
    Tensor embedded = embedding(tokens);
    nn::QKVAttention attn(d_model, n_head); // the notebook's MultiHeadAttention(d_model, n_head)
    Tensor hidden = attn(embedded);
    std::cout << "input x: " << torch_size(tokens.shape()) << ", and embedded: " << torch_size(embedded.shape())
              << ", and hidden state: " << torch_size(hidden.shape()) << "\n";
    nn::FusedQKVAttention attn_v2(d_model, n_head); // its MultiHeadAttentionV2(d_model, n_head)
    std::cout << "V2 hidden state: " << torch_size(attn_v2(embedded).shape()) << "\n\n";

    // The list of heads and the batched form are one computation: copy the
    // heads' weights into the batched projections and compare.
    std::cout << "-- Both forms are one computation --\n";
    manual_seed(3);
    nn::MultiHeadAttention list(n_head, d_model / n_head, d_model, seq_len, 0.0);
    nn::BatchedMultiHeadAttention batched(d_model, d_model, seq_len, 0.0, n_head);
    {
        NoGradGuard no_grad;
        const int64_t hs = d_model / n_head;
        for (int64_t h = 0; h < n_head; ++h) {
            auto one = list.heads->at<nn::Head>(h);
            batched.W_query->weight.narrow(0, h * hs, hs).copy_(one->query->weight);
            batched.W_key->weight.narrow(0, h * hs, hs).copy_(one->key->weight);
            batched.W_value->weight.narrow(0, h * hs, hs).copy_(one->value->weight);
        }
        batched.out_proj->weight.copy_(list.proj->weight);
        batched.out_proj->bias.copy_(list.proj->bias);
    }
    Tensor xe = randn({2, seq_len, d_model});
    std::cout << "list of heads == batched: " << py_bool(allclose(list(xe), batched(xe), 1e-5, 1e-6)) << "\n";
    return 0;
}
