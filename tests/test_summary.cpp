// summary(model, input) (nn/summary.h) of a small GPT, against a table
// written from the model's arithmetic in torchinfo's layout; the numbers
// behind it; frozen parameters; and that summary leaves the model as it was.
#include <catch2/catch.hpp>

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

// gpt.py's model with one block whose list of heads is replaced by Raschka's
// batched attention (replace_module), no dropout: 20 tokens, 8 positions,
// 16 channels, 2 heads.
std::shared_ptr<nn::GPTLanguageModel> small_gpt() {
    manual_seed(0);
    auto model = std::make_shared<nn::GPTLanguageModel>(
        nn::GPTConfig{.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 1});
    auto block = model->blocks->at<nn::Block>(0);
    block->sa = block->replace_module("sa", std::make_shared<nn::BatchedMultiHeadAttention>(16, 16, 8, 0.0, 2));
    return model;
}

} // namespace

TEST_CASE("summary prints a GPT as torchinfo would", "[summary]") {
    auto model = small_gpt();
    nn::ModelSummary s = nn::summary(*model, zeros({2, 8}, kInt64));
    // Rows in call order (Block calls ln1 before sa). Parameters: embeddings
    // 20*16 and 8*16; LayerNorms 2*16; attention 3 * 16*16 + (16*16 + 16);
    // the MLP (16*64 + 64) + (64*16 + 16); lm_head 16*20 + 20. Rows at the
    // depth limit (3) count everything below them; containers above it show
    // "--", their own parameters being none. The names' column is 60 wide:
    // the longest title plus 5 per level and 1, "Dropout
    // (blocks.0.ffwd.net.3): 5-4" (34 + 26) and the attention's (44 + 16).
    // Multiply-adds of the Linears, 16 rows each: 16 * (3*256 + 256 + 1024 +
    // 1024 + 320) = 54,272. Sizes: the input 2*8 int64 = 128 bytes; the
    // leaf layers with parameters output 15,104 bytes, twice for their
    // gradients 30,208; parameters 4,052 floats = 16,208 bytes.
    const std::string rule(110, '=');
    const std::string expected =
        rule + "\n" +
        "Layer (type (var_name):depth-idx)                            Output Shape              Param #\n" + rule +
        "\n" +
        "GPTLanguageModel (GPTLanguageModel)                          [2, 8, 20]                --\n"
        "├─Embedding (token_embedding_table): 1-1                     [2, 8, 16]                320\n"
        "├─Embedding (position_embedding_table): 1-2                  [8, 16]                   128\n"
        "├─Sequential (blocks): 1-3                                   [2, 8, 16]                --\n"
        "│    └─Block (blocks.0): 2-1                                 [2, 8, 16]                --\n"
        "│    │    └─LayerNorm (blocks.0.ln1): 3-1                    [2, 8, 16]                32\n"
        "│    │    └─BatchedMultiHeadAttention (blocks.0.sa): 3-2     [2, 8, 16]                1,040\n"
        "│    │    └─LayerNorm (blocks.0.ln2): 3-3                    [2, 8, 16]                32\n"
        "│    │    └─FeedForward (blocks.0.ffwd): 3-4                 [2, 8, 16]                2,128\n"
        "├─LayerNorm (ln_f): 1-4                                      [2, 8, 16]                32\n"
        "├─Linear (lm_head): 1-5                                      [2, 8, 20]                340\n" +
        rule + "\n" +
        "Total params: 4,052\n"
        "Trainable params: 4,052\n"
        "Non-trainable params: 0\n"
        "Total mult-adds (M): 0.05\n" +
        rule + "\n" +
        "Input size (MB): 0.00\n"
        "Forward/backward pass size (MB): 0.03\n"
        "Params size (MB): 0.02\n"
        "Estimated Total Size (MB): 0.05\n" +
        rule + "\n";
    CHECK(nn::to_string(s) == expected);
    CHECK(s.total_params == model->num_parameters());
    CHECK(s.mult_adds == 54272);
    CHECK(s.input_bytes == 128);
    CHECK(s.forward_backward_bytes == 30208);
    CHECK(s.param_bytes == 16208);
}

TEST_CASE("summary records every call, below the printed depth too", "[summary]") {
    auto model = small_gpt();
    nn::ModelSummary s = nn::summary(*model, zeros({2, 8}, kInt64), /*depth=*/5);
    // 11 rows to depth 3, then the attention's W_key, W_query, W_value,
    // dropout, out_proj and the MLP's net (depth 4), and net's four layers,
    // in call order: the model, the embeddings, blocks, blocks.0, ln1, sa, sa's
    // five (rows 7-11), ln2, ffwd, net, net's four (rows 15-18), ln_f, lm_head.
    REQUIRE(s.rows.size() == 21);
    const nn::SummaryRow& weights_dropout = s.rows[10];
    CHECK(weights_dropout.name == "blocks.0.sa.dropout");
    CHECK(weights_dropout.output_shape == Shape{2, 2, 8, 8}); // (B,NH,T,T)
    CHECK(weights_dropout.depth_index == 4);
    const nn::SummaryRow& relu = s.rows[16];
    CHECK(relu.name == "blocks.0.ffwd.net.1");
    CHECK(relu.type == "ReLU");
    CHECK(relu.depth == 5);
    CHECK(relu.output_shape == Shape{2, 8, 64});
    CHECK(nn::to_string(s).find("│    │    │    │    └─ReLU (blocks.0.ffwd.net.1): 5-2") != std::string::npos);
}

TEST_CASE("summary marks frozen parameters as torchinfo does", "[summary]") {
    auto model = small_gpt();
    model->token_embedding_table->weight.requires_grad_(false);
    std::string text = nn::to_string(nn::summary(*model, zeros({1, 8}, kInt64)));
    CHECK(text.find("├─Embedding (token_embedding_table): 1-1                     [1, 8, 16]                (320)\n") !=
          std::string::npos);
    CHECK(text.find("Trainable params: 3,732\nNon-trainable params: 320\n") != std::string::npos);
}

TEST_CASE("summary leaves the model's modes and hooks as they were, also when forward throws", "[summary]") {
    auto model = small_gpt();
    model->train();
    model->blocks->eval(); // a mixed state, put back module by module
    int calls = 0;
    auto handle = model->lm_head->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++calls; });
    nn::ModelSummary first = nn::summary(*model, zeros({2, 8}, kInt64));
    CHECK(calls == 1); // the user's hook runs with summary's
    CHECK(model->is_training());
    CHECK_FALSE(model->blocks->is_training());
    CHECK(model->ln_f->is_training());
    CHECK_THROWS_AS(nn::summary(*model, zeros({2, 8})), DTypeError); // float ids: GPT refuses them
    CHECK(model->is_training());
    CHECK(nn::to_string(nn::summary(*model, zeros({2, 8}, kInt64))) == nn::to_string(first)); // no leftover hooks
    CHECK(calls == 2);
    CHECK_THROWS_AS(nn::summary(*model, zeros({2, 8}, kInt64), -1), ValueError);
}
