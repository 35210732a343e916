// The lecture's stage models: see model.h. The classes below are the
// lecture's v2.py at each stage, with PyTorch's registration order; the gpt
// stage is nn::GPTLanguageModel or nn::fast::GPT.
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

bool has_attention(const ModelConfig& config) {
    const bool stacks_blocks =
        config.stage == Stage::Blocks || config.stage == Stage::LayerNorm || config.stage == Stage::GPT;
    return config.stage != Stage::Bigram && config.stage != Stage::Embed && (!stacks_blocks || config.n_layer > 0);
}

const char* kind_name(ModelKind kind) {
    return kind == ModelKind::Lecture ? "lecture" : kind == ModelKind::Fast ? "fast" : "nanogpt";
}

ModelKind kind_from_name(const std::string& name) {
    if (name == "lecture") return ModelKind::Lecture;
    if (name == "fast") return ModelKind::Fast;
    if (name == "nanogpt") return ModelKind::NanoGPT;
    throw std::invalid_argument("unknown model \"" + name + "\" (lecture, fast or nanogpt)");
}

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
    Tensor forward(const Tensor& input) override {
        Tensor x = input;
        x = x + (*sa)(x);
        x = x + (*ffwd)(x);
        return x;
    }
    std::shared_ptr<nn::MultiHeadAttention> sa;
    std::shared_ptr<nn::FeedForward> ffwd;
};

// The stages between bigram and gpt: embeddings, then the stage's middle
// (none for embed), a final LayerNorm (layernorm), then lm_head. The video's
// code: BigramLanguageModel, without the final gpt.py's _init_weights
// (docs/gpt.md, "Which gpt.py").
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
        case Stage::Blocks:
        case Stage::LayerNorm: {
            auto blocks = std::make_shared<nn::Sequential>();
            for (int64_t i = 0; i < c.n_layer; ++i) {
                if (c.stage == Stage::Blocks)
                    blocks->push_back(std::make_shared<ResidualBlock>(c.n_embd, c.n_head, c.block_size));
                else blocks->push_back(std::make_shared<nn::Block>(c.n_embd, c.n_head, c.block_size, c.dropout));
            }
            middle = register_module("blocks", blocks);
            if (c.stage == Stage::LayerNorm) ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd));
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
        if (ln_f) x = (*ln_f)(x);
        return (*lm_head)(x); // (B,T,V)
    }

    const int64_t block_size;
    std::shared_ptr<nn::Embedding> token_embedding_table, position_embedding_table;
    std::shared_ptr<nn::Module> middle;
    std::shared_ptr<nn::Module> ffwd_net;
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::shared_ptr<nn::Linear> lm_head;
};

} // namespace

std::shared_ptr<nn::Module> make_model(const ModelConfig& c) {
    if (c.stage == Stage::Bigram) return std::make_shared<Bigram>(c.vocab_size);
    if (c.stage != Stage::GPT) return std::make_shared<StageModel>(c);
    if (c.kind == ModelKind::NanoGPT) {
        // nanoGPT's model.py: its layout, and its initialisation drawn by the constructor.
        nn::fast::GPTConfig config{.vocab_size = c.vocab_size,
                                   .block_size = c.block_size,
                                   .n_embd = c.n_embd,
                                   .n_head = c.n_head,
                                   .n_layer = c.n_layer,
                                   .dropout = c.dropout,
                                   .bias = c.bias,
                                   .qkv_bias = c.bias,
                                   .lm_head_bias = false,
                                   .tie_weights = c.tie_weights,
                                   .embedding_dropout = true,
                                   .activation = nn::fast::Activation::gelu};
        return std::make_shared<nn::fast::GPT>(config);
    }
    const nn::GPTConfig config{.vocab_size = c.vocab_size,
                               .block_size = c.block_size,
                               .n_embd = c.n_embd,
                               .n_head = c.n_head,
                               .n_layer = c.n_layer,
                               .dropout = c.dropout};
    auto lecture = std::make_shared<nn::GPTLanguageModel>(config); // gpt.py's weights, drawn in gpt.py's order
    if (c.kind == ModelKind::Lecture) return lecture;
    // The fast model's own initial draws are overwritten by the lecture's
    // weights: the generator is put back where gpt.py's model left it, so
    // that the batches (and dropout masks) that follow are gpt.py's too.
    const Generator after_lecture = default_generator();
    auto fast = std::make_shared<nn::fast::GPT>(nn::fast::GPTConfig::lecture(config));
    default_generator() = after_lecture;
    fast->load_state_dict(nn::fast::from_lecture(lecture->state_dict()));
    return fast;
}

namespace {

// Removes hooks when the maps are taken, by return or by exception.
struct HookGuard {
    std::vector<nn::RemovableHandle> handles;
    ~HookGuard() {
        for (auto& handle : handles) handle.remove();
    }
};

std::vector<float> row_major(const Tensor& w) { // (T,T) -> floats
    Tensor c = w.contiguous();
    const float* p = c.data_ptr<float>();
    return std::vector<float>(p, p + c.numel());
}

} // namespace

Inside look_inside(nn::Module& model, const Tensor& ids) {
    model.eval();
    NoGradGuard no_grad;
    const Tensor prompt = ids.view({1, -1});
    Inside inside;
    if (auto* fast = dynamic_cast<nn::fast::GPT*>(&model)) {
        for (const nn::fast::AttentionInside& layer : fast->inspect_attention(prompt)) // (1,NH,T,*) each
            inside.layers.push_back({layer.q[0], layer.k[0], layer.v[0], layer.weights[0]});
        inside.logits = model(prompt)[0]; // (T,V)
        return inside;
    }
    // The lecture's heads: a hook on each Head's key, query, value and
    // dropout keeps their outputs, (1,T,hs) and (1,T,T).
    struct Captured {
        size_t layer;
        Tensor q, k, v, weights;
    };
    std::vector<Captured> heads; // in the heads' order
    HookGuard hooks;
    auto keep = [&heads, &hooks](nn::Module& module, size_t index, Tensor Captured::*slot) {
        hooks.handles.push_back(module.register_forward_hook(
            [&heads, index, slot](nn::Module&, const Tensor&, const Tensor& out) { heads[index].*slot = out[0]; }));
    };
    std::string parent_of_last = "\x01";
    for (const auto& [name, module] : model.named_modules()) {
        auto* head = dynamic_cast<nn::Head*>(module);
        if (!head) continue;
        const size_t dot = name.rfind('.');
        const std::string parent = dot == std::string::npos ? "" : name.substr(0, dot);
        const size_t layer = heads.empty() ? 0 : heads.back().layer + (parent != parent_of_last);
        parent_of_last = parent;
        heads.push_back({layer, {}, {}, {}, {}});
        keep(*head->query, heads.size() - 1, &Captured::q);
        keep(*head->key, heads.size() - 1, &Captured::k);
        keep(*head->value, heads.size() - 1, &Captured::v);
        // the dropout's input is the softmax's output: in eval mode, its output is the same tensor
        keep(*head->dropout, heads.size() - 1, &Captured::weights);
    }
    inside.logits = model(prompt)[0]; // (T,V)
    for (size_t first = 0; first < heads.size();) {
        size_t end = first;
        std::vector<Tensor> q, k, v, w;
        for (; end < heads.size() && heads[end].layer == heads[first].layer; ++end) {
            q.push_back(heads[end].q);
            k.push_back(heads[end].k);
            v.push_back(heads[end].v);
            w.push_back(heads[end].weights);
        }
        inside.layers.push_back({stack(q, 0), stack(k, 0), stack(v, 0), stack(w, 0)}); // (NH,T,hs), (NH,T,T)
        first = end;
    }
    return inside;
}

std::vector<std::vector<std::vector<float>>> attention_maps(nn::Module& model, const Tensor& ids) {
    std::vector<std::vector<std::vector<float>>> maps;
    for (const LayerInside& layer : look_inside(model, ids).layers) {
        maps.emplace_back();
        for (int64_t h = 0; h < layer.weights.size(0); ++h) maps.back().push_back(row_major(layer.weights[h]));
    }
    return maps;
}

} // namespace train
