// The attention explorer's data: what look_inside captured, written as JSON
// into the page's template (explore_page.cpp). See explore.h.
//
// The JSON, as the page's script reads it (T positions, NH heads, hs = C/NH):
//   tokens[t], ids[t]           the prompt
//   vocab{id: text}             every token the page names
//   weights[l][h][t]            query t's weights over keys 0..t (the rest are 0)
//   inside{l: {q, k, v, out}}   [h][t][hs]: queries, keys, values, weighted sums
//              scores           [h][t][T]: q . k for every key, before scale and mask
//   next{ids, logits}           [t][...]: every token's logit (ids null), or the
//                               kTopLogits largest when T x V is large
//   losses[t]                   -log p(ids[t+1]) at position t, t < T-1
//   train{steps, evals, sample} the run's losses and sample, or null
#include "explore.h"

#include <charconv>
#include <cmath>
#include <set>
#include <stdexcept>

#include "core/tensor/svg_text.h"
#include "model.h"

namespace train {

using namespace ember;

namespace {

// Above this many logits (T x V: a BPE vocabulary), each position keeps its
// kTopLogits largest; the page says its probabilities are then renormalised
// over those.
constexpr int64_t kAllLogitsLimit = 200000;
constexpr int64_t kTopLogits = 100;

// A float as the shortest text that reads back as the same float.
void put(std::string& out, float v) {
    if (!std::isfinite(v)) {
        out += "null"; // JSON has no infinity; the page shows null as "-inf"/"nan"
        return;
    }
    char buffer[32];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
    out.append(buffer, result.ptr);
}

void put(std::string& out, double v) {
    char buffer[32];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
    out.append(buffer, result.ptr);
}

void put(std::string& out, int64_t v) { out += std::to_string(v); }

// A JSON string: quotes, backslashes and control characters escaped, '<'
// too (so that no "</script>" can end the data early), and bytes that are
// not well-formed UTF-8 (a BPE token may hold part of a character) as U+FFFD.
void put(std::string& out, const std::string& s) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            if (b == '"' || b == '\\') out += {'\\', char(b)};
            else if (b < 0x20 || b == '<') out += flags::format("\\u%04x", b);
            else out += char(b);
            ++i;
            continue;
        }
        const size_t n = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = n != 0 && i + n <= s.size();
        for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
        if (ok) out.append(s, i, n);
        else out += "\xEF\xBF\xBD";
        i += ok ? n : 1;
    }
    out += '"';
}

// Rows of a 2-D float tensor (R,N) as [[...],...]; row r keeps `width(r)` values.
template <typename Width>
void put_rows(std::string& out, const Tensor& t, Width width) {
    const Tensor c = t.contiguous();
    const float* p = c.data_ptr<float>();
    const int64_t rows = c.size(0), n = c.size(1);
    out += '[';
    for (int64_t r = 0; r < rows; ++r) {
        out += r ? ",[" : "[";
        for (int64_t j = 0; j < width(r); ++j) {
            if (j) out += ',';
            put(out, p[r * n + j]);
        }
        out += ']';
    }
    out += ']';
}

void put_rows(std::string& out, const Tensor& t) {
    put_rows(out, t, [&t](int64_t) { return t.size(1); });
}

// Each head of a (NH,R,N) tensor: [head][row][...].
void put_heads(std::string& out, const Tensor& t) {
    out += '[';
    for (int64_t h = 0; h < t.size(0); ++h) {
        if (h) out += ',';
        put_rows(out, t[h]);
    }
    out += ']';
}

template <typename T>
void put_list(std::string& out, const std::vector<T>& values) {
    out += '[';
    for (size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        put(out, values[i]);
    }
    out += ']';
}

// The model's sizes in a line: "3 layers x 4 heads, n_embd 64 (head size 16), block_size 64, vocabulary 53".
std::string sizes(const ModelConfig& c, int64_t layers, int64_t heads, int64_t head_size) {
    return std::to_string(layers) + (layers == 1 ? " layer x " : " layers x ") + std::to_string(heads) +
           (heads == 1 ? " head" : " heads") + ", n_embd " + std::to_string(c.n_embd) + " (head size " +
           std::to_string(head_size) + "), block_size " + std::to_string(c.block_size) + ", vocabulary " +
           std::to_string(c.vocab_size);
}

} // namespace

std::string attention_form(const ModelConfig& c) {
    if (c.stage != Stage::GPT)
        return std::string("the lecture's \"") + stage_name(c.stage) +
               "\" stage in its own classes (nn::Head: softmax(q k^T hs^-0.5, causal) @ v, head by head); "
               "captured by forward hooks on each Head's query, key, value and dropout";
    switch (c.kind) {
    case ModelKind::Lecture:
        return "gpt.py's GPT in gpt.py's classes (nn::GPTLanguageModel: a Head per head, "
               "softmax(q k^T hs^-0.5, causal) @ v); captured by forward hooks on each Head's query, key, value "
               "and dropout";
    case ModelKind::Fast:
        return "gpt.py's GPT in the fast model (nn::fast::GPT: one c_attn projection for every head, fused "
               "attention without the T x T weights); the weights shown are computed by the unfused ops "
               "(inspect_attention), the same to rounding";
    case ModelKind::NanoGPT:
        return "nanoGPT's model.py in the fast model (GELU, tied lm_head, one c_attn projection for every head, "
               "fused attention); the weights shown are computed by the unfused ops (inspect_attention), the "
               "same to rounding";
    }
    return "?";
}

std::string explore_page(nn::Module& model, const RunState& run, const std::vector<int64_t>& ids,
                         const ExploreOptions& o) {
    const ModelConfig& mc = run.options.model;
    if (!has_attention(mc))
        throw InputError(std::string("the ") + stage_name(mc.stage) + " model has no attention to explore");
    const auto T = static_cast<int64_t>(ids.size());
    if (T < 1 || T > mc.block_size)
        throw InputError("the prompt has " + std::to_string(T) + " " + run.vocab.unit() +
                         "; the model reads 1 to block_size = " + std::to_string(mc.block_size));
    const Inside inside = look_inside(model, from_vector(ids));
    const auto L = static_cast<int64_t>(inside.layers.size());
    const int64_t NH = inside.layers[0].q.size(0), hs = inside.layers[0].q.size(2);
    if (o.layer < 0 || o.layer >= L)
        throw InputError("--layer " + std::to_string(o.layer + 1) + ": the model has " + std::to_string(L) +
                         (L == 1 ? " layer" : " layers"));
    const bool every_layer = L * T * NH * hs * 4 <= kAllLayersLimit;

    NoGradGuard no_grad;
    std::set<int64_t> named(ids.begin(), ids.end()); // the tokens the page shows by name
    std::string d = "{\"title\":";
    const std::string model_name =
        mc.stage == Stage::GPT ? "a GPT" : "the " + std::string(stage_name(mc.stage)) + " model";
    put(d, "attention of " + model_name + " over \"" + run.vocab.decode(from_vector(ids)) + "\"");
    d += ",\"form\":";
    put(d, attention_form(mc));
    d += ",\"sizes\":";
    put(d, sizes(mc, L, NH, hs));
    d += ",\"source\":";
    put(d, o.source);
    d += ",\"unit\":";
    put(d, run.vocab.is_chars() ? "character" : "token");
    d += ",\"tokens\":";
    put_list(d, run.vocab.pieces(ids));
    d += ",\"ids\":";
    put_list(d, ids);
    d += ",\"n_layer\":" + std::to_string(L) + ",\"n_head\":" + std::to_string(NH) +
         ",\"head_size\":" + std::to_string(hs) + ",\"scale\":";
    put(d, std::pow(static_cast<double>(hs), -0.5));

    // The weights: query t's row over keys 0..t (the mask zeroes the rest).
    d += ",\"weights\":[";
    for (int64_t l = 0; l < L; ++l) {
        d += l ? ",[" : "[";
        for (int64_t h = 0; h < NH; ++h) {
            if (h) d += ',';
            put_rows(d, inside.layers[l].weights[h], [](int64_t t) { return t + 1; });
        }
        d += ']';
    }
    // The query view's numbers: q, k, v, their scores and the weighted sums,
    // each computed by ember's ops, as the lecture's Head does.
    d += "],\"inside\":{";
    bool first = true;
    for (int64_t l = 0; l < L; ++l) {
        if (!every_layer && l != o.layer) continue;
        const LayerInside& layer = inside.layers[l];
        d += (first ? "\"" : ",\"") + std::to_string(l) + "\":{\"q\":";
        first = false;
        put_heads(d, layer.q);
        d += ",\"k\":";
        put_heads(d, layer.k);
        d += ",\"v\":";
        put_heads(d, layer.v);
        d += ",\"scores\":";
        put_heads(d, matmul(layer.q, layer.k.transpose(-2, -1))); // (NH,T,hs) @ (NH,hs,T) -> (NH,T,T)
        d += ",\"out\":";
        put_heads(d, matmul(layer.weights, layer.v)); // (NH,T,T) @ (NH,T,hs) -> (NH,T,hs)
        d += '}';
    }

    // Next-token predictions: the logits, and the prompt's per-token loss by log_softmax.
    const Tensor& logits = inside.logits; // (T,V)
    const int64_t V = logits.size(1);
    d += "},\"next\":{\"ids\":";
    if (T * V <= kAllLogitsLimit) {
        d += "null,\"logits\":";
        put_rows(d, logits);
        for (int64_t v = 0; v < V; ++v) named.insert(v);
    } else {
        const ValuesIndices top = topk(logits, kTopLogits, -1); // (T,kTopLogits) each
        const Tensor top_ids = top.indices.contiguous();
        const int64_t* p = top_ids.data_ptr<int64_t>();
        d += '[';
        for (int64_t t = 0; t < T; ++t) {
            std::vector<int64_t> row(p + t * kTopLogits, p + (t + 1) * kTopLogits);
            named.insert(row.begin(), row.end());
            if (t) d += ',';
            put_list(d, row);
        }
        d += "],\"logits\":";
        put_rows(d, top.values);
    }
    const Tensor logp = log_softmax(logits, -1).contiguous(); // (T,V)
    std::vector<float> losses;
    for (int64_t t = 0; t + 1 < T; ++t) losses.push_back(-logp.data_ptr<float>()[t * V + ids[t + 1]]);
    d += "},\"losses\":";
    put_list(d, losses);
    d += ",\"top_k\":" + std::to_string(std::min(o.top_k, V)) + ",\"vocab\":{";
    first = true;
    for (int64_t id : named) {
        d += (first ? "\"" : ",\"") + std::to_string(id) + "\":";
        first = false;
        put(d, run.vocab.tokens()[static_cast<size_t>(id)]);
    }

    // The training run: every step's loss, the evaluations, the sample.
    d += "},\"train\":";
    if (o.with_training && !run.step_losses.empty()) {
        std::vector<float> steps(run.step_losses.begin(), run.step_losses.end());
        d += "{\"steps\":";
        put_list(d, steps);
        d += ",\"evals\":[";
        for (size_t e = 0; e < run.evals.size(); ++e) {
            d += e ? ",[" : "[";
            put(d, run.evals[e].step);
            d += ',';
            put(d, static_cast<float>(run.evals[e].train_loss));
            d += ',';
            put(d, static_cast<float>(run.evals[e].val_loss));
            d += ']';
        }
        d += "],\"data\":";
        put(d, run.data_name);
        d += ",\"sample\":";
        put(d, o.sample);
        d += '}';
    } else {
        d += "null";
    }
    d += '}';

    std::string page = explore_template();
    const size_t at = page.find("EMBER_DATA");
    if (at == std::string::npos) throw std::logic_error("[explore_page] the template has no EMBER_DATA marker");
    return page.replace(at, 10, d);
}

void write_explore_page(const std::string& path, nn::Module& model, const RunState& run,
                        const std::vector<int64_t>& ids, const ExploreOptions& options) {
    const std::string why = internal::write_file_whole(path, explore_page(model, run, ids, options));
    if (!why.empty()) throw std::runtime_error("cannot write " + path + ": " + why);
}

} // namespace train
