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

TEST_CASE("BatchedMultiHeadAttention matches PyTorch in every configuration", "[attention]") {
    const Fixtures& f = fixtures("attention");
    using Config = nn::AttentionConfig;
    // Raschka's class with his signature and his "Your journey starts..." inputs.
    check_module_case(f, "batched.raschka",
                      [] { return std::make_shared<nn::BatchedMultiHeadAttention>(3, 2, 6, 0.0, 2); });
    check_module_case(f, "batched.bias_dropout",
                      [] { return std::make_shared<nn::BatchedMultiHeadAttention>(16, 16, 8, 0.1, 4, true); });
    check_module_case(f, "batched.d_in_ne_d_out",
                      [] { return std::make_shared<nn::BatchedMultiHeadAttention>(12, 8, 6, 0.0, 2); });
    check_module_case(f, "batched.noncausal", [] {
        return std::make_shared<nn::BatchedMultiHeadAttention>(
            Config{.d_in = 8, .d_out = 8, .context_length = 4, .num_heads = 2, .causal = false});
    });
    check_module_case(f, "batched.fused", [] {
        return std::make_shared<nn::BatchedMultiHeadAttention>(
            Config{.d_in = 12, .d_out = 12, .context_length = 5, .num_heads = 3, .qkv_bias = true, .fused_qkv = true});
    });
    check_module_case(f, "batched.out_dropout", [] {
        return std::make_shared<nn::BatchedMultiHeadAttention>(
            Config{.d_in = 8, .d_out = 8, .context_length = 6, .num_heads = 2, .dropout = 0.1, .out_dropout = 0.2});
    });
}

TEST_CASE("attention modules print as PyTorch prints them", "[attention][repr]") {
    const Fixtures& f = fixtures("attention");
    // ember's class is BatchedMultiHeadAttention where the Python twin's is too.
    CHECK(nn::MultiHeadAttention(2, 4, 8, 8, 0.1).repr() == f.text("repr.mha"));
    CHECK(nn::BatchedMultiHeadAttention(3, 2, 6, 0.5, 2).repr() == f.text("repr.batched"));
}

namespace {

// Copies the heads' weights of a list-of-heads MultiHeadAttention into a
// batched one with separate projections: head h's (hs, C) weight becomes
// rows h*hs .. (h+1)*hs of the batched (NH*hs, C) weight.
void copy_heads_into(nn::MultiHeadAttention& list, nn::BatchedMultiHeadAttention& batched) {
    NoGradGuard no_grad;
    const int64_t hs = batched.head_dim;
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
    // The two differ only in how the scale is applied (* hs^-0.5 versus / sqrt(hs)).
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

TEST_CASE("attention keeps its weights for plots when asked", "[attention]") {
    manual_seed(0);
    nn::Head head(8, 4, 6, 0.0);
    head.keep_attention = true;
    head(randn({1, 6, 8}));
    REQUIRE(head.attention.shape() == Shape{1, 6, 6});
    require_close(sum(head.attention, -1), ones({1, 6}), {1e-6, 1e-6}, "rows sum to 1");
    CHECK(sum(triu(head.attention, 1)).item<float>() == 0.0f); // causal: nothing above the diagonal
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
    CHECK_THROWS_AS(nn::MultiHeadAttention(0, 4, 8, 4, 0.0), ValueError);
}

TEST_CASE("every causal attention form gives a full forward's outputs from its cache, step by step",
          "[attention][cache]") {
    const auto check = [](const std::string& what, nn::Module& layer, auto setup) {
        INFO(what);
        manual_seed(3);
        Tensor x = randn({2, 6, 8});
        layer.eval();
        NoGradGuard no_grad;
        Tensor full = layer.forward(x);
        setup(2);
        require_close(layer.forward(x.slice(1, 0, 2)), full.slice(1, 0, 2), {1e-5, 1e-6}, "two positions");
        for (int64_t t = 2; t < 6; ++t)
            require_close(layer.forward(x.slice(1, t, t + 1)), full.slice(1, t, t + 1), {1e-5, 1e-6},
                          "position " + std::to_string(t));
    };
    for (bool flash : {false, true}) {
        const std::string kind = flash ? " (fused)" : " (unfused)";
        manual_seed(1);
        nn::Head head(8, 4, 6, 0.1, flash);
        check("Head" + kind, head, [&](int64_t b) { head.setup_cache(b); });
        manual_seed(1);
        nn::MultiHeadAttention heads(2, 4, 8, 6, 0.1, flash);
        check("MultiHeadAttention" + kind, heads, [&](int64_t b) {
            for (size_t h = 0; h < heads.heads->size(); ++h) heads.heads->at<nn::Head>(h)->setup_cache(b);
        });
        for (bool fused_qkv : {false, true}) {
            manual_seed(1);
            nn::BatchedMultiHeadAttention batched({.d_in = 8,
                                                   .d_out = 8,
                                                   .context_length = 6,
                                                   .num_heads = 2,
                                                   .dropout = 0.1,
                                                   .fused_qkv = fused_qkv,
                                                   .flash = flash});
            check(std::string("BatchedMultiHeadAttention") + (fused_qkv ? ", fused QKV" : "") + kind, batched,
                  [&](int64_t b) { batched.setup_cache(b); });
        }
    }
}
