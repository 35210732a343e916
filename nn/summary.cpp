// summary(model, input) and its printing: see summary.h. The layout rules
// (column widths, the tree's prefixes, which rows show a parameter count)
// are torchinfo's, each noted where it is applied. Tests:
// tests/test_summary.cpp.
#include "nn/summary.h"

#include <cstdio>
#include <ostream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/autograd/autograd.h"
#include "nn/linear.h"

namespace ember::nn {

namespace {

int64_t bytes_of(const Tensor& t) { return t.numel() * static_cast<int64_t>(element_size(t.dtype())); }

// Undoes what summary() changes on the model, also when forward throws:
// removes its hooks and puts back every module's training flag.
class SummaryScope {
public:
    explicit SummaryScope(Module& model) {
        // Pre-order, so that a parent's recursive train() comes before its
        // children's own flags are put back.
        for (const auto& [name, m] : model.named_modules()) modes_.emplace_back(m, m->is_training());
    }
    ~SummaryScope() {
        for (RemovableHandle& h : handles) h.remove();
        for (auto& [m, training] : modes_) m->train(training);
    }
    SummaryScope(const SummaryScope&) = delete;
    SummaryScope& operator=(const SummaryScope&) = delete;
    std::vector<RemovableHandle> handles;

private:
    std::vector<std::pair<Module*, bool>> modes_;
};

} // namespace

ModelSummary summary(Module& model, const Tensor& input, int64_t depth) {
    if (depth < 0) fail<ValueError>("summary", "depth must be non-negative, got ", depth);
    ModelSummary s;
    s.max_depth = depth;
    for (const Tensor& p : model.parameters()) {
        s.total_params += p.numel();
        if (p.requires_grad()) s.trainable_params += p.numel();
        s.param_bytes += bytes_of(p);
    }
    s.input_bytes = bytes_of(input);

    SummaryScope scope(model);
    std::unordered_map<const Module*, std::string> names;
    for (const auto& [name, m] : model.named_modules()) names.emplace(m, name);
    std::vector<size_t> open; // the rows of the calls in progress, innermost last
    std::set<const Module*> called;

    for (const auto& [name, m] : model.named_modules()) {
        // Before forward: a new row, one level below the calls in progress.
        scope.handles.push_back(m->register_forward_pre_hook([&](Module& module, const Tensor&) {
            SummaryRow row;
            row.name = names.at(&module);
            row.type = module.type_name();
            row.depth = static_cast<int64_t>(open.size());
            row.recursive = !called.insert(&module).second;
            row.is_leaf = module.named_children().empty();
            int64_t trainable = 0;
            for (const auto& [pname, p] : module.named_parameters()) {
                row.num_params += p.numel();
                if (p.requires_grad()) trainable += p.numel();
                if (pname.find('.') == std::string::npos) row.own_params += p.numel();
            }
            row.trainable = trainable > 0;
            open.push_back(s.rows.size());
            s.rows.push_back(row);
        }));
        // After forward: the output, and what torchinfo adds up from it.
        scope.handles.push_back(m->register_forward_hook([&](Module& module, const Tensor&, const Tensor& output) {
            SummaryRow& row = s.rows[open.back()];
            open.pop_back();
            row.output_shape = output.shape();
            // x (..., in) -> (..., out) is numel/out rows of in*out multiply-adds.
            if (auto* linear = dynamic_cast<Linear*>(&module))
                s.mult_adds += output.numel() / linear->out_features * linear->weight.numel();
            // Activations a backward pass keeps, and their gradients (torchinfo's estimate).
            if (row.is_leaf && row.num_params > 0) s.forward_backward_bytes += 2 * bytes_of(output);
        }));
    }
    model.eval(); // dropout off, so no random draws either
    NoGradGuard no_grad;
    model(input);

    // torchinfo numbers the rows of each depth in order, over the whole table.
    std::unordered_map<int64_t, int64_t> count;
    for (SummaryRow& row : s.rows) row.depth_index = ++count[row.depth];
    return s;
}

// ---- printing ---------------------------------------------------------------------------------

namespace {

// 12345 -> "12,345", as Python's f"{n:,}".
std::string with_commas(int64_t n) {
    std::string digits = std::to_string(n < 0 ? -n : n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return n < 0 ? "-" + out : out;
}

// A shape as Python prints a list, [2, 8, 16]; torchinfo shows "--" for none.
std::string shape_list(const Shape& shape) {
    if (shape.empty()) return "--";
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + "]";
}

// "Block (blocks.0): 2-1"; the model's own row is "GPT (GPT)".
std::string title(const SummaryRow& row) {
    std::string t = row.type + " (" + (row.depth == 0 ? row.type : row.name) + ")";
    if (row.depth > 0) t += ": " + std::to_string(row.depth) + "-" + std::to_string(row.depth_index);
    return t;
}

// The tree drawn before a title: "├─" at depth 1, then "│    " per level
// above and "└─". Returned with its width in characters (not bytes).
std::pair<std::string, int64_t> tree_prefix(int64_t depth) {
    if (depth == 0) return {"", 0};
    if (depth == 1) return {"├─", 2};
    std::string out;
    for (int64_t i = 1; i < depth; ++i) out += "│    ";
    return {out + "└─", 5 * (depth - 1) + 2};
}

// The parameter column: a leaf, or a row at the printed depth limit, shows
// everything below it; a container only what it holds itself, as the rows
// below show the rest. "(n)" when none of it trains, "--" for nothing.
std::string params_column(const SummaryRow& row, int64_t max_depth) {
    if (row.num_params == 0) return "--";
    if (row.recursive) return "(recursive)";
    if (row.is_leaf || row.depth == max_depth) {
        std::string n = with_commas(row.num_params);
        return row.trainable ? n : "(" + n + ")";
    }
    return row.own_params > 0 ? with_commas(row.own_params) : "--";
}

std::string fixed2(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

} // namespace

std::ostream& operator<<(std::ostream& out, const ModelSummary& s) {
    // torchinfo's widths: 25 per column; 40 for the names, or the longest
    // title plus 5 per level and 1, rounded up to a multiple of 5.
    const int64_t col_width = 25;
    int64_t name_width = 40, longest = 0;
    for (const SummaryRow& row : s.rows)
        longest = std::max<int64_t>(longest, static_cast<int64_t>(title(row).size()) + row.depth * 5 + 1);
    if (longest >= name_width) name_width = (longest + 4) / 5 * 5;

    // One line: the name padded to name_width, each column to col_width,
    // one space after each, trailing spaces dropped.
    auto line = [&](const std::string& name, int64_t name_chars, const std::vector<std::string>& cols) {
        std::string text = name + std::string(std::max<int64_t>(0, name_width - name_chars), ' ') + " ";
        for (const std::string& c : cols)
            text += c + std::string(std::max<int64_t>(0, col_width - static_cast<int64_t>(c.size())), ' ') + " ";
        text.erase(text.find_last_not_of(' ') + 1);
        return text + "\n";
    };
    const std::string rule = std::string(name_width + 2 * col_width, '=') + "\n";
    const std::string header = "Layer (type (var_name):depth-idx)";

    out << rule << line(header, static_cast<int64_t>(header.size()), {"Output Shape", "Param #"}) << rule;
    for (const SummaryRow& row : s.rows) {
        if (row.depth > s.max_depth) continue;
        auto [prefix, prefix_chars] = tree_prefix(row.depth);
        std::string t = title(row);
        out << line(prefix + t, prefix_chars + static_cast<int64_t>(t.size()),
                    {shape_list(row.output_shape), params_column(row, s.max_depth)});
    }
    const double mb = 1e6;
    const double macs = static_cast<double>(s.mult_adds);
    const char* macs_unit = macs >= 1e12 ? "T" : macs >= 1e9 ? "G" : "M";
    const double macs_scaled = macs / (macs >= 1e12 ? 1e12 : macs >= 1e9 ? 1e9 : 1e6);
    const int64_t total_bytes = s.input_bytes + s.forward_backward_bytes + s.param_bytes;
    out << rule << "Total params: " << with_commas(s.total_params) << "\n"
        << "Trainable params: " << with_commas(s.trainable_params) << "\n"
        << "Non-trainable params: " << with_commas(s.total_params - s.trainable_params) << "\n"
        << "Total mult-adds (" << macs_unit << "): " << fixed2(macs_scaled) << "\n"
        << rule << "Input size (MB): " << fixed2(static_cast<double>(s.input_bytes) / mb) << "\n"
        << "Forward/backward pass size (MB): " << fixed2(static_cast<double>(s.forward_backward_bytes) / mb) << "\n"
        << "Params size (MB): " << fixed2(static_cast<double>(s.param_bytes) / mb) << "\n"
        << "Estimated Total Size (MB): " << fixed2(static_cast<double>(total_bytes) / mb) << "\n"
        << rule;
    return out;
}

std::string to_string(const ModelSummary& summary) {
    std::ostringstream out;
    out << summary;
    return out.str();
}

} // namespace ember::nn
