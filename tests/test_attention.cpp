// Attention (nn/attention.h): every form in the notebooks, matched to PyTorch
// (parameters to the bit, outputs, gradients, dropout masks); the list and
// batched forms agree; the notebooks' mistakes change the result; errors.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

TEST_CASE("Head and the list-of-heads MultiHeadAttention match PyTorch", "[attention]") {
    const Fixtures& f = fixtures("attention");
    check_module_case(f, "head", [] { return std::make_shared<nn::Head>(32, 8, 8, 0.0); });
    check_module_case(f, "head.short_dropout", [] { return std::make_shared<nn::Head>(16, 4, 8, 0.2); });
    check_module_case(f, "mha", [] { return std::make_shared<nn::MultiHeadAttention>(4, 8, 32, 8, 0.1); });
}

TEST_CASE("Raschka's and the \"Implementing Multi-head Attention\" classes match PyTorch", "[attention]") {
    const Fixtures& f = fixtures("attention");
    // Raschka's class with his signature and his "Your journey starts..." inputs.
    check_module_case(f, "batched.raschka",
                      [] { return std::make_shared<nn::BatchedMultiHeadAttention>(3, 2, 6, 0.0, 2); });
    check_module_case(f, "batched.bias_dropout",
                      [] { return std::make_shared<nn::BatchedMultiHeadAttention>(16, 16, 8, 0.1, 4, true); });
    check_module_case(f, "batched.d_in_ne_d_out",
                      [] { return std::make_shared<nn::BatchedMultiHeadAttention>(12, 8, 6, 0.0, 2); });
    // T = 4 of a context_length of 6: the mask is truncated to the tokens.
    check_module_case(f, "batched.short",
                      [] { return std::make_shared<nn::BatchedMultiHeadAttention>(8, 8, 6, 0.1, 2); });
    check_module_case(f, "qkv", [] { return std::make_shared<nn::QKVAttention>(8, 2); });
    check_module_case(f, "qkv.fused", [] { return std::make_shared<nn::FusedQKVAttention>(12, 3); });
}

TEST_CASE("attention modules print as PyTorch prints them", "[attention][repr]") {
    const Fixtures& f = fixtures("attention");
    CHECK(nn::MultiHeadAttention(2, 4, 8, 8, 0.1).repr() == f.text("repr.mha"));
    CHECK(nn::BatchedMultiHeadAttention(3, 2, 6, 0.5, 2).repr() == f.text("repr.batched"));
    CHECK(nn::QKVAttention(8, 2).repr() == f.text("repr.qkv"));
    CHECK(nn::FusedQKVAttention(12, 3).repr() == f.text("repr.qkv.fused"));
}

namespace {

// Copies the heads' weights of a list-of-heads MultiHeadAttention into a
// batched one with separate projections: head h's (hs, C) weight becomes
// rows h*hs .. (h+1)*hs of the batched (NH*hs, C) weight.
void copy_heads_into(nn::MultiHeadAttention& list, nn::BatchedMultiHeadAttention& batched) {
    NoGradGuard no_grad;
    const int64_t hs = batched.head_size;
    for (size_t h = 0; h < list.heads->size(); ++h) {
        auto head = list.heads->at<nn::Head>(h);
        int64_t rows = static_cast<int64_t>(h) * hs;
        batched.W_query->weight.narrow(0, rows, hs).copy_(head->query->weight);
        batched.W_key->weight.narrow(0, rows, hs).copy_(head->key->weight);
        batched.W_value->weight.narrow(0, rows, hs).copy_(head->value->weight);
    }
    batched.out_proj->weight.copy_(list.proj->weight);
    batched.out_proj->bias.copy_(list.proj->bias);
}

} // namespace

TEST_CASE("the list-of-heads and batched forms agree in outputs and gradients", "[attention]") {
    manual_seed(3);
    const int64_t B = 2, T = 6, C = 12, NH = 3;
    nn::MultiHeadAttention list(NH, C / NH, C, T, 0.0);
    nn::BatchedMultiHeadAttention batched(C, C, T, 0.0, NH);
    copy_heads_into(list, batched);
    Tensor x = randn({B, T, C}).requires_grad_();
    Tensor x2 = x.detach().clone().requires_grad_();
    Tensor a = list(x), b = batched(x2);
    // The two differ only in how the scale is applied (* hs^-0.5 versus / sqrt(hs))
    // and the order of the products.
    require_close(a, b, {1e-5, 1e-6}, "outputs");
    Tensor g = randn({B, T, C});
    a.backward(g);
    b.backward(g);
    require_close(x.grad(), x2.grad(), {1e-5, 1e-6}, "input gradients");
    for (int64_t h = 0; h < NH; ++h) {
        auto head = list.heads->at<nn::Head>(h);
        require_close(head->query->weight.grad(), batched.W_query->weight.grad().narrow(0, h * (C / NH), C / NH),
                      {1e-5, 1e-6}, "query gradient of head " + std::to_string(h));
    }
    require_close(list.proj->weight.grad(), batched.out_proj->weight.grad(), {1e-5, 1e-6}, "projection gradient");
}

TEST_CASE("each mistake in the notebooks changes the result", "[attention]") {
    manual_seed(1337);
    const int64_t B = 2, T = 5, C = 16, hs = 4, NH = C / hs;
    Tensor q = randn({B, NH, T, hs}), k = randn({B, NH, T, hs}), v = randn({B, NH, T, hs});
    Tensor mask = tril(ones({T, T})) == 0;
    auto attend = [&](const Tensor& scores, const Tensor& values) {
        return matmul(softmax(scores.masked_fill(mask, -INFINITY), -1), values);
    };
    Tensor right = attend(matmul(q, k.transpose(-2, -1)) * std::pow(double(hs), -0.5), v);
    // The self-attention walkthrough (and the Italian notes) scale by C**-0.5,
    // the embedding size, not the head size.
    Tensor scaled_by_C = attend(matmul(q, k.transpose(-2, -1)) * std::pow(double(C), -0.5), v);
    CHECK(max(abs(scaled_by_C - right)).item<float>() > 1e-2f);
    // "Multiple headers"' Head computes q @ v^T where q @ k^T is meant.
    Tensor q_times_v = attend(matmul(q, v.transpose(-2, -1)) * std::pow(double(hs), -0.5), v);
    CHECK(max(abs(q_times_v - right)).item<float>() > 1e-2f);
    // Merging heads needs the transpose first: (B,NH,T,hs) -> (B,T,NH,hs) -> (B,T,C).
    Tensor merged = right.transpose(1, 2).reshape({B, T, C});
    Tensor mixed = right.reshape({B, T, C}); // reshape without transpose mixes heads and positions
    CHECK(max(abs(mixed - merged)).item<float>() > 1e-2f);
    // ...while the right merge puts head h's output at channels h*hs .. (h+1)*hs.
    require_equal(merged.index({Slice(), Slice(), Slice(hs, 2 * hs)}), right.select(1, 1));
    // "Multiple headers"' False: in (B,NH,T,hs), x[1] is batch element 1, not
    // head 1. With B == NH the shapes agree, so only the values tell.
    Tensor q2 = randn({2, 2, T, hs}), k2 = randn({2, 2, T, hs}), v2 = randn({2, 2, T, hs});
    Tensor heads2 = attend(matmul(q2, k2.transpose(-2, -1)), v2); // (B=2,NH=2,T,hs)
    Tensor head1 = attend(matmul(q2.select(1, 1), k2.select(1, 1).transpose(-2, -1)), v2.select(1, 1)); // (B,T,hs)
    REQUIRE(heads2[1].shape() == head1.shape());
    CHECK(max(abs(heads2[1] - head1)).item<float>() > 1e-2f); // the notebook's comparison
    require_close(heads2.select(1, 1), head1, {1e-6, 1e-6}, "head 1 is x[:, 1]");
}

TEST_CASE("a forward hook on a head's dropout sees its weights", "[attention][hooks]") {
    // The lecture's Head keeps nothing for plots; its weights are the
    // softmax's output, which its dropout receives.
    manual_seed(0);
    nn::Head head(8, 4, 6, 0.0);
    Tensor weights;
    auto handle =
        head.dropout->register_forward_hook([&](nn::Module&, const Tensor& input, const Tensor&) { weights = input; });
    Tensor x = randn({1, 6, 8});
    head(x);
    REQUIRE(weights.shape() == Shape{1, 6, 6});
    require_close(sum(weights, -1), ones({1, 6}), {1e-6, 1e-6}, "rows sum to 1");
    CHECK(sum(triu(weights, 1)).item<float>() == 0.0f); // causal: nothing above the diagonal
    // They are the lecture's lines computed by hand.
    Tensor k = head.key->forward(x), q = head.query->forward(x);
    Tensor wei = softmax((matmul(q, k.transpose(-2, -1)) * 0.5).masked_fill(tril(ones({6, 6})) == 0, -INFINITY), -1);
    require_equal(weights, wei, "the hooked weights");
    handle.remove();
}

TEST_CASE("attention rejects sequences longer than its mask, and bad shapes", "[attention][errors]") {
    nn::Head head(8, 4, 6, 0.0);
    CHECK_THROWS_AS(head(ones({1, 7, 8})), ShapeError);
    CHECK_THROWS_WITH(head(ones({1, 7, 8})), Catch::Contains("[Head]") && Catch::Contains("T=7") &&
                                                 Catch::Contains("block_size=6") && Catch::Contains("(1,7,8)"));
    CHECK_THROWS_AS(head(ones({7, 8})), ShapeError);
    nn::BatchedMultiHeadAttention mha(8, 8, 4, 0.0, 2);
    CHECK_THROWS_WITH(mha(ones({2, 5, 8})), Catch::Contains("context_length=4"));
    CHECK_THROWS_AS(mha(ones({2, 4, 7})), ShapeError);
    CHECK_THROWS_AS(nn::BatchedMultiHeadAttention(8, 9, 4, 0.0, 2), ValueError);
    CHECK_THROWS_AS(nn::BatchedMultiHeadAttention(0, 8, 4, 0.0, 2), ValueError);
    CHECK_THROWS_AS(nn::MultiHeadAttention(0, 4, 8, 4, 0.0), ValueError);
    CHECK_THROWS_AS(nn::Head(8, 0, 4, 0.0), ValueError);
    nn::QKVAttention qkv(8, 2);
    CHECK_THROWS_WITH(qkv(ones({2, 4, 7})), Catch::Contains("[QKVAttention]") && Catch::Contains("(2,4,7)"));
    CHECK_THROWS_AS(nn::QKVAttention(8, 3), ValueError);
    nn::FusedQKVAttention fused(12, 3);
    CHECK_THROWS_WITH(fused(ones({12})), Catch::Contains("[FusedQKVAttention]") && Catch::Contains("(12)"));
    CHECK_THROWS_AS(nn::FusedQKVAttention(12, 5), ValueError);
}

TEST_CASE("the lecture's classes hold no cache, flash or inspection switch", "[attention]") {
    // What a learner reads is what runs: a Head is its three Linears, its
    // mask and its dropout; nothing else is registered.
    nn::Head head(8, 4, 6, 0.1);
    std::vector<std::string> children;
    for (const auto& [name, child] : head.named_children()) children.push_back(name);
    CHECK(children == std::vector<std::string>{"key", "query", "value", "dropout"});
    CHECK(head.named_buffers().size() == 1);
}
