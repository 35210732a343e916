// The lecture's stage models: see model.h. The classes below are the
// lecture's v2.py at each stage, with PyTorch's registration order.
#include "model.h"

#include <stdexcept>

namespace train {

using namespace ember;

const char* stage_name(Stage stage) {
    switch (stage) {
    case Stage::Bigram: return "bigram";
    case Stage::Embed: return "embed";
    case Stage::Head: return "head";
    case Stage::MultiHead: return "multihead";
    case Stage::FeedForward: return "ffwd";
    case Stage::Blocks: return "blocks";
    case Stage::LayerNorm: return "layernorm";
    case Stage::GPT: return "gpt";
    }
    return "?";
}

Stage stage_from_name(const std::string& name) {
    for (Stage s : {Stage::Bigram, Stage::Embed, Stage::Head, Stage::MultiHead, Stage::FeedForward, Stage::Blocks,
                    Stage::LayerNorm, Stage::GPT})
        if (name == stage_name(s)) return s;
    throw std::invalid_argument("unknown model stage \"" + name + "\"");
}

bool has_attention(Stage stage) { return stage != Stage::Bigram && stage != Stage::Embed; }

namespace {

// bigram.py: each token reads the logits for the next token off a (V,V) table.
class Bigram : public nn::Module {
public:
    explicit Bigram(int64_t vocab) : Module("BigramLanguageModel") {
        token_embedding_table = register_module("token_embedding_table", std::make_shared<nn::Embedding>(vocab, vocab));
    }
    Tensor forward(const Tensor& idx) override { return (*token_embedding_table)(idx); } // (B,T,V)
    std::shared_ptr<nn::Embedding> token_embedding_table;
};

// The lecture's heads without a projection: cat(heads, -1).
class HeadsOnly : public nn::Module {
public:
    HeadsOnly(int64_t num_heads, int64_t head_size, int64_t n_embd, int64_t block_size) : Module("MultiHeadAttention") {
        heads = register_module("heads", std::make_shared<nn::ModuleList>());
        for (int64_t h = 0; h < num_heads; ++h)
            heads->push_back(std::make_shared<nn::Head>(n_embd, head_size, block_size, 0.0));
    }
    Tensor forward(const Tensor& x) override {
        std::vector<Tensor> outs;
        for (const auto& [name, head] : heads->named_children()) outs.push_back((*head)(x));
        return cat(outs, -1); // NH x (B,T,hs) -> (B,T,NH*hs)
    }
    std::shared_ptr<nn::ModuleList> heads;
};

// The lecture's first FeedFoward (the ffwd stage): net = Linear(C, C), ReLU.
class FirstFeedForward : public nn::Module {
public:
    explicit FirstFeedForward(int64_t n_embd) : Module("FeedFoward") {
        net = register_module("net", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
                                         std::make_shared<nn::Linear>(n_embd, n_embd), std::make_shared<nn::ReLU>()}));
    }
    Tensor forward(const Tensor& x) override { return (*net)(x); }
    std::shared_ptr<nn::Sequential> net;
};

// A Block before LayerNorm was added: x = x + sa(x); x = x + ffwd(x).
class ResidualBlock : public nn::Module {
public:
    ResidualBlock(int64_t n_embd, int64_t n_head, int64_t block_size) : Module("Block") {
        sa = register_module("sa", std::make_shared<nn::MultiHeadAttention>(n_head, n_embd / n_head, n_embd, block_size,
                                                                            0.0));
        ffwd = register_module("ffwd", std::make_shared<nn::FeedForward>(n_embd, 0.0));
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = x + (*sa)(x);
        return h + (*ffwd)(h);
    }
    std::shared_ptr<nn::MultiHeadAttention> sa;
    std::shared_ptr<nn::FeedForward> ffwd;
};

// The stages between bigram and LayerNorm: embeddings, then the stage's
// middle (none for embed), then lm_head.
class StageModel : public nn::Module {
public:
    explicit StageModel(const ModelConfig& c) : Module("BigramLanguageModel"), block_size(c.block_size) {
        token_embedding_table =
            register_module("token_embedding_table", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd));
        position_embedding_table =
            register_module("position_embedding_table", std::make_shared<nn::Embedding>(c.block_size, c.n_embd));
        switch (c.stage) {
        case Stage::Embed: break; // nothing between the embeddings and lm_head
        case Stage::Head:
            middle = register_module("sa_head", std::make_shared<nn::Head>(c.n_embd, c.n_embd, c.block_size, 0.0));
            break;
        case Stage::MultiHead:
        case Stage::FeedForward: {
            middle = register_module("sa_heads", std::make_shared<HeadsOnly>(c.n_head, c.n_embd / c.n_head, c.n_embd,
                                                                             c.block_size));
            if (c.stage == Stage::FeedForward)
                ffwd_net = register_module("ffwd", std::make_shared<FirstFeedForward>(c.n_embd));
            break;
        }
        case Stage::Blocks: {
            auto blocks = std::make_shared<nn::Sequential>();
            for (int64_t i = 0; i < c.n_layer; ++i)
                blocks->push_back(std::make_shared<ResidualBlock>(c.n_embd, c.n_head, c.block_size));
            middle = register_module("blocks", blocks);
            break;
        }
        default: throw std::invalid_argument("StageModel does not build this stage");
        }
        lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.n_embd, c.vocab_size));
    }

    Tensor forward(const Tensor& idx) override {
        const int64_t T = idx.size(1);
        Tensor x = (*token_embedding_table)(idx) + (*position_embedding_table)(arange(T)); // (B,T,C)
        if (middle) x = (*middle)(x);
        if (ffwd_net) x = (*ffwd_net)(x);
        return (*lm_head)(x); // (B,T,V)
    }

    const int64_t block_size;
    std::shared_ptr<nn::Embedding> token_embedding_table, position_embedding_table;
    std::shared_ptr<nn::Module> middle;
    std::shared_ptr<nn::Module> ffwd_net;
    std::shared_ptr<nn::Linear> lm_head;
};

} // namespace

std::shared_ptr<nn::Module> make_model(const ModelConfig& c) {
    switch (c.stage) {
    case Stage::Bigram: return std::make_shared<Bigram>(c.vocab_size);
    case Stage::LayerNorm:
    case Stage::GPT:
        return std::make_shared<nn::GPT>(nn::GPTConfig{.vocab_size = c.vocab_size,
                                                       .block_size = c.block_size,
                                                       .n_embd = c.n_embd,
                                                       .n_head = c.n_head,
                                                       .n_layer = c.n_layer,
                                                       .dropout = c.dropout,
                                                       .gpt_init = c.gpt_init});
    default: return std::make_shared<StageModel>(c);
    }
}

std::vector<std::vector<nn::Module*>> attention_layers(nn::Module& model) {
    // Heads come in registration order; a new layer starts whenever the
    // module holding the heads changes.
    std::vector<std::vector<nn::Module*>> layers;
    std::string current_parent = "\x01";
    for (const auto& [name, module] : model.named_modules()) {
        if (dynamic_cast<nn::BatchedMultiHeadAttention*>(module)) {
            layers.push_back({module});
            current_parent = "\x01";
        } else if (dynamic_cast<nn::Head*>(module)) {
            std::string parent = name.substr(0, name.rfind('.') == std::string::npos ? 0 : name.rfind('.'));
            if (parent != current_parent) layers.emplace_back();
            layers.back().push_back(module);
            current_parent = parent;
        }
    }
    return layers;
}

std::vector<std::vector<std::vector<float>>> attention_maps(nn::Module& model, const Tensor& ids) {
    auto layers = attention_layers(model);
    for (auto& layer : layers)
        for (nn::Module* m : layer) {
            if (auto* h = dynamic_cast<nn::Head*>(m)) h->keep_attention = true;
            if (auto* b = dynamic_cast<nn::BatchedMultiHeadAttention*>(m)) b->keep_attention = true;
        }
    {
        NoGradGuard no_grad;
        model(ids.view({1, -1}));
    }
    auto rows = [](const Tensor& w) { // (T,T) -> row-major floats
        Tensor c = w.contiguous();
        const float* p = c.data_ptr<float>();
        return std::vector<float>(p, p + c.numel());
    };
    std::vector<std::vector<std::vector<float>>> maps;
    for (auto& layer : layers) {
        maps.emplace_back();
        for (nn::Module* m : layer) {
            if (auto* h = dynamic_cast<nn::Head*>(m)) {
                maps.back().push_back(rows(h->attention[0]));
                h->keep_attention = false;
            } else if (auto* b = dynamic_cast<nn::BatchedMultiHeadAttention*>(m)) {
                for (int64_t head = 0; head < b->attention.size(1); ++head)
                    maps.back().push_back(rows(b->attention[0][head]));
                b->keep_attention = false;
            }
        }
    }
    return maps;
}

} // namespace train
