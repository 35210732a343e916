// GPT-2 checkpoints in Hugging Face's and nanoGPT's layouts: see pretrained.h.
#include "nn/pretrained.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/autograd/autograd.h"
#include "nn/init.h"
#include "nn/json.h"

namespace ember::nn::fast {

using internal::Json;

namespace {

constexpr const char* kRead = "from_pretrained";
constexpr const char* kWrite = "save_pretrained";

// ---- config.json ----------------------------------------------------------------------------

std::string read_text(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        fail<CheckpointError>(kRead, "cannot read ", path, ": it is a directory");
    if (!std::filesystem::exists(path, ec)) fail<CheckpointError>(kRead, "cannot read ", path, ": no such file");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) fail<CheckpointError>(kRead, "cannot read ", path);
    return text.str();
}

// The reads of one config.json's fields, each error naming the file and the field.
class ConfigReader {
public:
    ConfigReader(const Json& root, std::string path) : root_(root), path_(std::move(path)) {}

    bool has(const char* key) const { return root_.find(key) != nullptr; }
    const Json* find(const char* key) const { return root_.find(key); }

    int64_t positive(const char* key, const Json* value = nullptr) const {
        const Json* v = value ? value : root_.find(key);
        if (!v) bad(key, "is missing");
        if (v->kind != Json::Kind::Integer || v->integer < 1)
            bad(key, "must be a positive integer, got " + describe(*v));
        return v->integer;
    }
    bool flag(const char* key, bool otherwise) const {
        const Json* v = root_.find(key);
        if (!v) return otherwise;
        if (v->kind != Json::Kind::Other || (v->text != "true" && v->text != "false"))
            bad(key, "must be true or false, got " + describe(*v));
        return v->text == "true";
    }
    std::string string(const char* key, const std::string& otherwise) const {
        const Json* v = root_.find(key);
        if (!v) return otherwise;
        if (v->kind != Json::Kind::String) bad(key, "must be a string, got " + describe(*v));
        return v->text;
    }
    double number(const char* key, double otherwise) const {
        const Json* v = root_.find(key);
        if (!v) return otherwise;
        if (v->kind != Json::Kind::Integer && v->kind != Json::Kind::Number)
            bad(key, "must be a number, got " + describe(*v));
        return v->number;
    }
    [[noreturn]] void bad(const char* key, const std::string& what) const {
        fail<CheckpointError>(kRead, path_, ": \"", key, "\" ", what);
    }

    static std::string describe(const Json& v) {
        switch (v.kind) {
        case Json::Kind::Object: return "an object";
        case Json::Kind::Array: return "an array";
        case Json::Kind::String: return "the string \"" + v.text + "\"";
        case Json::Kind::Integer: return std::to_string(v.integer);
        case Json::Kind::Number: {
            std::ostringstream s;
            s << v.number;
            return s.str();
        }
        case Json::Kind::Other: return v.text;
        }
        return "?";
    }

private:
    const Json& root_;
    std::string path_;
};

// The sizes both layouts name alike (the context's length is named apart).
void read_sizes(const ConfigReader& r, GPTConfig& c) {
    c.vocab_size = r.positive("vocab_size");
    c.n_embd = r.positive("n_embd");
    c.n_head = r.positive("n_head");
    c.n_layer = r.positive("n_layer");
    if (c.n_embd % c.n_head != 0)
        r.bad("n_embd",
              "(" + std::to_string(c.n_embd) + ") must be a multiple of \"n_head\" (" + std::to_string(c.n_head) + ")");
}

// GPT2Config (transformers' configuration_gpt2.py): the fields that change
// the function, each checked against what the fast model computes.
GPTConfig huggingface_config(const ConfigReader& r) {
    GPTConfig c; // GPT-2's layout switches: biases everywhere, tied lm_head without bias
    read_sizes(r, c);
    c.block_size = r.positive("n_positions", r.has("n_positions") ? nullptr : r.find("n_ctx"));
    const std::string act = r.string("activation_function", "gelu_new");
    if (act == "gelu_new" || act == "gelu_pytorch_tanh") c.activation = Activation::gelu_tanh;
    else if (act == "gelu") c.activation = Activation::gelu;
    else if (act == "relu") c.activation = Activation::relu;
    else r.bad("activation_function", "is \"" + act + "\"; ember has gelu_new (tanh GELU), gelu and relu");
    const double eps = r.number("layer_norm_epsilon", 1e-5);
    if (std::abs(eps - 1e-5) > 1e-12) r.bad("layer_norm_epsilon", "must be 1e-05 (ember's LayerNorm's)");
    if (const Json* inner = r.find("n_inner");
        inner && inner->text != "null" && (inner->kind != Json::Kind::Integer || inner->integer != 4 * c.n_embd))
        r.bad("n_inner",
              "must be null or 4 n_embd (" + std::to_string(4 * c.n_embd) + "), got " + ConfigReader::describe(*inner));
    if (!r.flag("scale_attn_weights", true)) r.bad("scale_attn_weights", "must be true: ember scales by hs^-0.5");
    if (r.flag("scale_attn_by_inverse_layer_idx", false))
        r.bad("scale_attn_by_inverse_layer_idx", "must be false: ember scales every layer by hs^-0.5 alone");
    if (r.flag("add_cross_attention", false)) r.bad("add_cross_attention", "must be false: GPT-2 has none");
    c.tie_weights = r.flag("tie_word_embeddings", true);
    return c;
}

// nanoGPT's model_args (model.py's GPTConfig): bias switches every bias
// and the LayerNorms' at once; the GELU is nn.GELU(), the erf form.
GPTConfig nanogpt_config(const ConfigReader& r) {
    GPTConfig c;
    read_sizes(r, c);
    c.block_size = r.positive("block_size");
    if (!r.has("bias")) r.bad("bias", "is missing");
    c.bias = c.qkv_bias = r.flag("bias", true);
    c.activation = Activation::gelu;
    return c;
}

// ---- tensor names ------------------------------------------------------------------------------

// The Conv1D weights Hugging Face stores (in, out): a Linear's transposed.
bool is_conv1d_weight(const std::string& name) {
    for (const char* end : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
        const size_t n = std::char_traits<char>::length(end);
        if (name.size() > n && name.compare(name.size() - n, n, end) == 0) return true;
    }
    return false;
}

// The buffers GPT-2's files may hold and the fast model does not: each
// layer's causal mask (h.N.attn.bias, (1,1,n_positions,n_positions)) and
// masked_bias (a scalar -1e4), with or without "transformer.".
bool is_ignored_buffer(const std::string& name) {
    for (const char* end : {".attn.bias", ".attn.masked_bias"}) {
        const size_t n = std::char_traits<char>::length(end);
        if (name.size() > n && name.compare(name.size() - n, n, end) == 0) return true;
    }
    return false;
}

constexpr const char* kPrefix = "transformer.";

std::string without_prefix(const std::string& name) {
    return name.rfind(kPrefix, 0) == 0 ? name.substr(std::char_traits<char>::length(kPrefix)) : name;
}

// Throws unless `file` holds nothing but `used` and the ignored buffers.
void check_no_unexpected(const StateDict& file, const std::set<std::string>& used, const std::string& where,
                         bool ignore_buffers) {
    for (const auto& [name, t] : file)
        if (!used.count(name) && !(ignore_buffers && is_ignored_buffer(name)))
            fail<CheckpointError>(kRead, where, ": unexpected tensor \"", name, "\" ", t.shape(),
                                  " (not a parameter of this configuration)");
}

// The checked copy of `file`'s tensor `key` into the model's `name`, shaped `want`.
Tensor take(const StateDict& file, const std::string& key, const Shape& want, const std::string& where,
            bool transposed) {
    if (!file.contains(key)) fail<CheckpointError>(kRead, where, ": tensor \"", key, "\" is missing");
    Tensor t = file.at(key);
    if (t.dtype() != kFloat32 && t.dtype() != kFloat64)
        fail<CheckpointError>(kRead, where, ": tensor \"", key, "\" is ", dtype_name(t.dtype()),
                              ", not a floating-point tensor");
    Shape stored = want;
    if (transposed) std::swap(stored[0], stored[1]);
    if (t.shape() != stored)
        fail<CheckpointError>(kRead, where, ": tensor \"", key, "\" is ", t.shape(), ", expected ", stored,
                              transposed ? " (a Conv1D weight, stored (in, out))" : "");
    t = t.to(kFloat32);
    return transposed ? t.t().contiguous() : t;
}

} // namespace

const char* layout_name(Layout layout) { return layout == Layout::huggingface ? "huggingface" : "nanogpt"; }

Layout layout_from_name(const std::string& name) {
    if (name == "huggingface") return Layout::huggingface;
    if (name == "nanogpt") return Layout::nanogpt;
    fail<ValueError>("layout_from_name", "a layout is huggingface or nanogpt, got \"", name, "\"");
}

GPTConfig read_config(const std::string& dir, Layout* layout) {
    const std::string path = dir + "/config.json";
    Json root;
    try {
        root = internal::parse_json(read_text(path), path, kRead);
    } catch (const SafetensorsError& e) {
        fail<CheckpointError>(kRead, e.what());
    }
    if (root.kind != Json::Kind::Object) fail<CheckpointError>(kRead, path, ": not a JSON object");
    ConfigReader r(root, path);
    Layout found;
    GPTConfig c;
    if (r.has("model_type")) {
        if (r.string("model_type", "") != "gpt2")
            r.bad("model_type", "is \"" + r.string("model_type", "") + "\"; ember reads GPT-2 (\"gpt2\")");
        found = Layout::huggingface;
        c = huggingface_config(r);
    } else if (r.has("block_size")) {
        found = Layout::nanogpt;
        c = nanogpt_config(r);
    } else {
        fail<CheckpointError>(kRead, path,
                              ": neither Hugging Face's GPT-2 config (\"model_type\": \"gpt2\") nor nanoGPT's "
                              "model_args (\"block_size\", ...)");
    }
    c.dropout = 0.0;
    if (layout) *layout = found;
    return c;
}

StateDict to_huggingface(const GPT& model) {
    StateDict out;
    for (const auto& [name, t] : model.state_dict()) {
        if (name == "lm_head.weight" && model.config.tie_weights) continue; // it is wte.weight
        const std::string key = without_prefix(name);
        out.insert(key, is_conv1d_weight(key) ? t.detach().t().contiguous() : t.detach());
    }
    return out;
}

namespace {

// The model's tensors from a file's: `expected` (a model's state_dict)
// gives the names and shapes. Hugging Face's names may lack "transformer."
// and hold Conv1D weights; nanoGPT's are the model's own.
StateDict convert(const StateDict& file, const StateDict& expected, const GPTConfig& config, Layout layout,
                  const std::string& where) {
    const bool hf = layout == Layout::huggingface;
    StateDict out;
    std::set<std::string> used;
    for (const auto& [name, t] : expected) {
        std::string key = hf ? without_prefix(name) : name;
        if (hf && !file.contains(key) && file.contains(kPrefix + key)) key = kPrefix + key;
        if (name == "lm_head.weight" && config.tie_weights) {
            // Tied: wte.weight is the output layer. A file may still hold
            // lm_head.weight (PyTorch's state_dict does); it must be the same.
            const Tensor& wte = out.at("transformer.wte.weight");
            if (file.contains(name)) {
                used.insert(name);
                if (!allclose(take(file, name, t.shape(), where, false), wte, 0.0, 0.0))
                    fail<CheckpointError>(kRead, where,
                                          ": lm_head.weight differs from wte.weight, but the config ties them");
            }
            out.insert(name, wte);
            continue;
        }
        used.insert(key);
        out.insert(name, take(file, key, t.shape(), where, hf && is_conv1d_weight(key)));
    }
    check_no_unexpected(file, used, where, /*ignore_buffers=*/hf);
    return out;
}

} // namespace

std::shared_ptr<GPT> from_pretrained(const std::string& dir, double dropout, Layout* layout) {
    Layout found;
    GPTConfig config = read_config(dir, &found);
    config.dropout = dropout;
    const std::string path = dir + "/model.safetensors";
    StateDict file = load_safetensors(path);
    std::shared_ptr<GPT> model;
    {
        init::NoInitGuard no_init; // every weight is loaded next
        model = std::make_shared<GPT>(config);
    }
    model->load_state_dict(convert(file, model->state_dict(), config, found, path));
    if (layout) *layout = found;
    return model;
}

TextLoss text_loss(GPT& model, const std::vector<int64_t>& ids,
                   const std::function<void(int64_t done, int64_t total)>& progress) {
    const int64_t n = static_cast<int64_t>(ids.size()), block = model.config.block_size;
    if (n < 2) fail<ValueError>("text_loss", "needs at least 2 tokens (one to predict from, one to predict), got ", n);
    NoGradGuard no_grad;
    struct RestoreMode { // train mode back as it was, also when an id is out of range
        GPT& model;
        bool training;
        ~RestoreMode() { model.train(training); }
    } restore{model, model.is_training()};
    model.eval();
    TextLoss result;
    double total = 0; // the sum of every predicted token's loss, in double
    for (int64_t start = 0; start + 1 < n; start += block) {
        const int64_t end = std::min(start + block + 1, n); // one past the chunk's last token
        Tensor chunk = from_vector(std::vector<int64_t>(ids.begin() + start, ids.begin() + end), {1, end - start});
        const int64_t predicted = end - start - 1;
        Tensor loss = model.forward(chunk.slice(1, 0, -1), chunk.slice(1, 1)).loss; // the mean over `predicted`
        total += loss.item() * static_cast<double>(predicted);
        result.tokens += predicted;
        ++result.chunks;
        if (progress) progress(result.tokens, n - 1);
    }
    result.mean = total / static_cast<double>(result.tokens);
    return result;
}

// ---- writing --------------------------------------------------------------------------------

namespace {

std::string huggingface_config_json(const GPTConfig& c) {
    if (!c.bias || !c.qkv_bias || c.lm_head_bias)
        fail<ValueError>(kWrite,
                         "Hugging Face's GPT-2 has every bias but lm_head's (bias, qkv_bias, no "
                         "lm_head_bias); this model has bias=",
                         c.bias, ", qkv_bias=", c.qkv_bias, ", lm_head_bias=", c.lm_head_bias);
    const char* act = c.activation == Activation::gelu_tanh ? "gelu_new"
                      : c.activation == Activation::gelu    ? "gelu"
                                                            : "relu";
    std::ostringstream j;
    j << "{\n"
      << "  \"activation_function\": \"" << act << "\",\n"
      << "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
      << "  \"attn_pdrop\": " << c.dropout << ",\n"
      << "  \"embd_pdrop\": " << (c.embedding_dropout ? c.dropout : 0.0) << ",\n"
      << "  \"initializer_range\": 0.02,\n"
      << "  \"layer_norm_epsilon\": 1e-05,\n"
      << "  \"model_type\": \"gpt2\",\n"
      << "  \"n_ctx\": " << c.block_size << ",\n"
      << "  \"n_embd\": " << c.n_embd << ",\n"
      << "  \"n_head\": " << c.n_head << ",\n"
      << "  \"n_inner\": null,\n"
      << "  \"n_layer\": " << c.n_layer << ",\n"
      << "  \"n_positions\": " << c.block_size << ",\n"
      << "  \"resid_pdrop\": " << c.dropout << ",\n"
      << "  \"tie_word_embeddings\": " << (c.tie_weights ? "true" : "false") << ",\n"
      << "  \"vocab_size\": " << c.vocab_size << "\n"
      << "}\n";
    return j.str();
}

std::string nanogpt_config_json(const GPTConfig& c) {
    if (c.bias != c.qkv_bias || c.lm_head_bias || !c.tie_weights || c.activation != Activation::gelu)
        fail<ValueError>(kWrite,
                         "nanoGPT's model has biases everywhere or nowhere, no lm_head bias, tied "
                         "weights and the erf GELU; this model has bias=",
                         c.bias, ", qkv_bias=", c.qkv_bias, ", lm_head_bias=", c.lm_head_bias,
                         ", tie_weights=", c.tie_weights, ", activation ",
                         c.activation == Activation::gelu_tanh ? "gelu_tanh"
                         : c.activation == Activation::gelu    ? "gelu"
                                                               : "relu");
    std::ostringstream j;
    j << "{\n"
      << "  \"n_layer\": " << c.n_layer << ",\n"
      << "  \"n_head\": " << c.n_head << ",\n"
      << "  \"n_embd\": " << c.n_embd << ",\n"
      << "  \"block_size\": " << c.block_size << ",\n"
      << "  \"bias\": " << (c.bias ? "true" : "false") << ",\n"
      << "  \"vocab_size\": " << c.vocab_size << ",\n"
      << "  \"dropout\": " << c.dropout << "\n"
      << "}\n";
    return j.str();
}

} // namespace

void save_pretrained(const GPT& model, const std::string& dir, Layout layout) {
    // Everything that can refuse runs before any file is touched.
    const std::string config =
        layout == Layout::huggingface ? huggingface_config_json(model.config) : nanogpt_config_json(model.config);
    StateDict tensors = layout == Layout::huggingface ? to_huggingface(model) : model.state_dict();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!std::filesystem::is_directory(dir, ec))
        fail<CheckpointError>(kWrite, "cannot make the directory ", dir, ec ? ": " + ec.message() : "");
    // Hugging Face's loader wants the "format" metadata to be "pt".
    save_safetensors(tensors, dir + "/model.safetensors", {{"format", "pt"}});
    internal::write_file_atomically(dir + "/config.json", {{config.data(), config.size()}}, kWrite);
}

} // namespace ember::nn::fast
