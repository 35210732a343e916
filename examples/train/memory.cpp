// The memory a run needs and the memory the machine has: see memory.h.
#include "memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace train {

using ember::human_bytes;

double count_parameters(const ModelConfig& c) {
    const double V = static_cast<double>(c.vocab_size), T = static_cast<double>(c.block_size),
                 C = static_cast<double>(c.n_embd), L = static_cast<double>(c.n_layer);
    if (c.stage == Stage::Bigram) return V * V; // the (V,V) table
    if (c.stage == Stage::GPT && c.kind == ModelKind::NanoGPT) {
        // nanoGPT's layout: c_attn (3C,C), c_proj (C,C), c_fc (4C,C), c_proj
        // (C,4C), two LayerNorms per block and ln_f; biases only with --bias
        // yes; lm_head shares wte's weight unless --tie-weights no.
        const double bias = c.bias ? 1 : 0;
        const double block = 12 * C * C + bias * (3 * C + C + 4 * C + C) + 2 * C * (1 + bias);
        return V * C + T * C + L * block + C * (1 + bias) + (c.tie_weights ? 0 : C * V);
    }
    const double embeddings = V * C + T * C; // token and position tables
    const double lm_head = C * V + V;
    const double heads = 3 * C * C;                           // key, query and value of every head together, no biases
    const double projection = C * C + C;                      // the heads' output projection
    const double mlp = (C * 4 * C + 4 * C) + (4 * C * C + C); // Linear(C,4C), Linear(4C,C)
    const double layer_norm = 2 * C;
    switch (c.stage) {
    case Stage::Head:
    case Stage::MultiHead: return embeddings + heads + lm_head;
    case Stage::FeedForward: return embeddings + heads + (C * C + C) + lm_head;
    case Stage::Blocks: return embeddings + L * (heads + projection + mlp) + lm_head;
    default: return embeddings + L * (heads + projection + mlp + 2 * layer_norm) + layer_norm + lm_head;
    }
}

MemoryEstimate estimate_memory(const ModelConfig& c, int64_t batch_size, double text_bytes) {
    const double B = static_cast<double>(batch_size), T = static_cast<double>(c.block_size),
                 C = static_cast<double>(c.n_embd), NH = static_cast<double>(c.n_head),
                 V = static_cast<double>(c.vocab_size);
    // Layers with attention: n_layer blocks, or the single attention layer of
    // the head, multihead and ffwd stages; the bigram model has none.
    const double L = c.stage == Stage::Bigram                                                           ? 0
                     : c.stage == Stage::Blocks || c.stage == Stage::LayerNorm || c.stage == Stage::GPT ? c.n_layer
                                                                                                        : 1;
    const double dropout = c.dropout > 0 ? 1 : 0;
    MemoryEstimate m;
    m.parameters = 16 * count_parameters(c);
    // Floats kept for backward at the peak of a step: least-squares fits of
    // measured peaks over B, T, C, NH, L, V and dropout (docs/training.md),
    // their coefficients rounded up. btc is a (B,T,C) tensor, att the
    // attention weights (B,NH,T,T), btv the logits (B,T,V).
    const double btc = B * T * C, att = B * NH * T * T, btv = B * T * V;
    if (c.stage == Stage::Bigram) {
        m.activations = 4 * 3 * btv; // the logits, their softmax and gradient
    } else if (c.stage == Stage::GPT && c.kind != ModelKind::Lecture) {
        // The fast model keeps no (T,T) weights (flash) but its dropout's bit
        // masks; its mask is one (T,T) of bools per layer.
        m.buffers = L * T * T;
        m.activations = 4 * (L * 14 * btc + dropout * L * 0.1 * att + 2 * btv + 9 * btc);
    } else {
        // The lecture's classes: every Head's (B,T,T) weights and its tril
        // (a T x T float per head), and with dropout the weights' masks too.
        m.buffers = 4 * L * NH * T * T;
        m.activations = 4 * (L * (13 * btc + 1.25 * att) + dropout * L * 1.25 * att + 2 * btv + 9 * btc);
    }
    m.data = 17 * text_bytes; // the text, its ids as a std::vector and as a tensor (8 bytes each)
    // A parameter's first gradient of a step becomes its .grad as it is
    // when nothing else holds it (AccumulateGrad), else a copy, and for a
    // moment both are held: 4 bytes per element of one parameter at a
    // time, kept here as a bound. The largest is the bigram's table, else
    // an MLP's (4C,C), the fast model's c_attn (3C,C), an embedding or
    // lm_head: bounded by the largest of those.
    m.gradient_copy = 4 * (c.stage == Stage::Bigram ? V * V : std::max({4 * C * C, V * C, T * C}));
    return m;
}

namespace {

// The first number on the line of `file` that starts with `key` (a
// /proc/meminfo line, "MemAvailable:   23253568 kB", or a one-number cgroup
// file with an empty key), or nothing.
std::optional<double> read_number(const std::string& file, const std::string& key) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(key, 0) != 0) continue;
        std::istringstream fields(line.substr(key.size()));
        double value = 0;
        if (fields >> value) return value;
        return std::nullopt; // "max": no limit
    }
    return std::nullopt;
}

// The memory controller's folder of this process's cgroup, from
// /proc/self/cgroup: "0::/path" (cgroup v2) or "N:memory:/path" (v1).
std::string cgroup_folder(const std::string& root, bool& v2) {
    std::ifstream in(root + "/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        const size_t first = line.find(':'), second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos) continue;
        const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
        if (controllers.empty()) {
            v2 = true;
            return root + "/sys/fs/cgroup" + path;
        }
        if (controllers == "memory") {
            v2 = false;
            return root + "/sys/fs/cgroup/memory" + path;
        }
    }
    v2 = true;
    return root + "/sys/fs/cgroup";
}

} // namespace

std::optional<MemoryLimit> available_memory(const std::string& root) {
    std::optional<MemoryLimit> best;
    if (auto kib = read_number(root + "/proc/meminfo", "MemAvailable:"))
        best = MemoryLimit{*kib * 1024, "MemAvailable in /proc/meminfo"};
    // The cgroup's own folder, else the mount's root (what a container sees).
    bool v2 = true;
    const std::string own = cgroup_folder(root, v2);
    const std::string limit_file = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    const std::string usage_file = v2 ? "/memory.current" : "/memory.usage_in_bytes";
    const std::string mount = root + (v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory");
    for (const std::string& folder : {own, mount}) {
        auto limit = read_number(folder + limit_file, "");
        auto usage = read_number(folder + usage_file, "");
        if (!limit || !usage) continue;
        const double left = std::max(0.0, *limit - *usage);
        if (!best || left < best->bytes) best = MemoryLimit{left, "the memory cgroup's limit less its usage"};
        break;
    }
    return best;
}

std::string memory_problem(const MemoryEstimate& need, const std::optional<MemoryLimit>& limit,
                           const std::string& shrink, int processes) {
    if (!limit || processes * need.total() <= limit->bytes) return "";
    std::string parts;
    for (const auto& [bytes, what] :
         {std::pair{need.parameters, "parameters, gradients and AdamW state "},
          std::pair{need.buffers, "attention masks "}, std::pair{need.activations, "activations of a batch "},
          std::pair{need.data, "the text "}, std::pair{need.gradient_copy, "a gradient's copy "}})
        if (bytes > 0) parts += (parts.empty() ? "" : ", ") + std::string(what) + human_bytes(bytes);
    const std::string who = processes == 1 ? "this run needs about " + human_bytes(need.total())
                                           : "the " + std::to_string(processes) +
                                                 " processes of this run on this machine need about " +
                                                 human_bytes(processes * need.total()) + ", each";
    return who + " " + (processes == 1 ? "" : human_bytes(need.total()) + " ") + "of memory (" + parts +
           "), but only " + human_bytes(limit->bytes) + " is available (" + limit->source + "); use a smaller " +
           shrink;
}

int processes_on_this_machine() {
    const int world = ember::distributed::get_world_size();
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (local == nullptr) return world;
    const int n = std::atoi(local);
    return n >= 1 && n <= world ? n : world;
}

} // namespace train
