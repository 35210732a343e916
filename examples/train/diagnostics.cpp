// train_gpt --diagnostics: see diagnostics.h.
#include "diagnostics.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "../flags.h"
#include "core/tensor/svg_text.h"
#include "svg.h"

namespace train {

using namespace ember;

namespace {

// t's values as doubles, in row-major order.
std::vector<double> values_of(const Tensor& t) {
    Tensor d = t.detach().to(kFloat64).contiguous();
    const double* p = d.data_ptr<double>();
    return std::vector<double>(p, p + d.numel());
}

double std_of(const std::vector<double>& v) {
    if (v.size() < 2) return NAN; // Bessel's correction needs two values (torch.std gives nan)
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double sum_sq = 0;
    for (double x : v) sum_sq += (x - mean) * (x - mean);
    return std::sqrt(sum_sq / static_cast<double>(v.size() - 1));
}

std::string shape_text(const Shape& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + ")";
}

} // namespace

Stats describe(const Tensor& t, int bins) {
    const std::vector<double> v = values_of(t);
    Stats s;
    s.count = static_cast<int64_t>(v.size());
    if (v.empty()) return s;
    for (double x : v) s.mean += x, s.nonpositive += x <= 0 ? 1 : 0;
    s.mean /= static_cast<double>(v.size());
    s.nonpositive /= static_cast<double>(v.size());
    s.std = std_of(v);
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    s.lo = *lo, s.hi = *hi;
    if (!std::isfinite(s.lo) || !std::isfinite(s.hi)) return s; // no histogram of infinities or NaN
    // All values equal: one bin of width 1 around them, as torch.histogram widens an empty range.
    if (s.hi == s.lo) s.lo -= 0.5, s.hi += 0.5;
    s.density.assign(static_cast<size_t>(bins), 0.0);
    const double width = (s.hi - s.lo) / bins;
    for (double x : v) {
        const auto bin =
            std::min<int64_t>(bins - 1, static_cast<int64_t>((x - s.lo) / width)); // the last bin is closed
        s.density[static_cast<size_t>(bin)] += 1;
    }
    for (double& d : s.density) d /= static_cast<double>(v.size()) * width;
    return s;
}

double update_to_data(const Tensor& before, const Tensor& after) {
    const std::vector<double> b = values_of(before), a = values_of(after);
    if (a.size() != b.size())
        throw std::invalid_argument("update_to_data: before has " + std::to_string(b.size()) + " values, after " +
                                    std::to_string(a.size()));
    std::vector<double> change(a.size());
    for (size_t i = 0; i < a.size(); ++i) change[i] = a[i] - b[i];
    return std_of(change) / std_of(b);
}

Diagnostics::Diagnostics(nn::Module& model) {
    for (const auto& [name, module] : model.named_modules())
        if (module->type_name() == "ReLU" || module->type_name() == "GELU") acts_.emplace_back(name, module);
    captured_.resize(acts_.size());
    for (size_t k = 0; k < acts_.size(); ++k)
        handles_.push_back(
            acts_[k].second->register_forward_hook([this, k](nn::Module&, const Tensor&, const Tensor& out) {
                if (!capture_ || !out.requires_grad()) return;
                out.retain_grad();
                captured_[k] = out;
            }));
    for (const auto& [name, p] : model.named_parameters())
        if (p.dim() == 2) weight_names_.push_back(name), weights_.push_back(p);
}

Diagnostics::~Diagnostics() {
    for (auto& h : handles_) h.remove();
}

void Diagnostics::after_backward(int64_t step) {
    if (!capture_) return;
    capture_ = false;
    histogram_step_ = step;
    activation_stats_.clear(), grad_stats_.clear(), weight_stats_.clear();
    for (size_t k = 0; k < acts_.size(); ++k) {
        if (!captured_[k].defined()) continue;
        activation_stats_.push_back({acts_[k].first, captured_[k].sizes(), describe(captured_[k])});
        const Tensor g = captured_[k].grad();
        if (g.defined()) grad_stats_.push_back({acts_[k].first, g.sizes(), describe(g)});
        captured_[k] = Tensor();
    }
    for (size_t j = 0; j < weights_.size(); ++j) {
        const Tensor g = weights_[j].grad();
        if (!g.defined()) continue;
        Named n{weight_names_[j], g.sizes(), describe(g)};
        n.grad_to_data = n.stats.std / describe(weights_[j], 1).std;
        weight_stats_.push_back(std::move(n));
    }
}

void Diagnostics::before_update() {
    before_.clear();
    for (const Tensor& w : weights_) before_.push_back(w.detach().clone());
}

void Diagnostics::after_update(int64_t step) {
    std::vector<double> ratios;
    for (size_t j = 0; j < weights_.size(); ++j) ratios.push_back(std::log10(update_to_data(before_[j], weights_[j])));
    update_steps_.push_back(step);
    update_ratios_.push_back(std::move(ratios));
    before_.clear();
}

namespace {

Series histogram_series(const std::string& label, const Stats& s) {
    Series out{label, {}, {}};
    const double width = (s.hi - s.lo) / static_cast<double>(s.density.size());
    for (size_t i = 0; i < s.density.size(); ++i) {
        out.x.push_back(s.lo + (static_cast<double>(i) + 0.5) * width);
        out.y.push_back(s.density[i]);
    }
    return out;
}

} // namespace

std::string Diagnostics::write(const std::string& out_dir, const std::string& title) const {
    using flags::format;
    const std::string at = "at step " + std::to_string(histogram_step_);
    std::vector<Series> acts, grads, weights, updates;
    for (const Named& n : activation_stats_)
        acts.push_back(histogram_series(format("%s: mean %.3f, std %.3f, %.1f%% <= 0", n.name.c_str(), n.stats.mean,
                                               n.stats.std, 100 * n.stats.nonpositive),
                                        n.stats));
    for (const Named& n : grad_stats_)
        grads.push_back(
            histogram_series(format("%s: mean %+.2e, std %.2e", n.name.c_str(), n.stats.mean, n.stats.std), n.stats));
    for (const Named& n : weight_stats_)
        weights.push_back(histogram_series(format("%s %s: std %.2e, grad:data %.2e", n.name.c_str(),
                                                  shape_text(n.shape).c_str(), n.stats.std, n.grad_to_data),
                                           n.stats));
    for (size_t j = 0; j < weight_names_.size(); ++j) {
        Series s{weight_names_[j] + " " + shape_text(weights_[j].sizes()), {}, {}};
        for (size_t k = 0; k < update_steps_.size(); ++k) {
            s.x.push_back(static_cast<double>(update_steps_[k]));
            s.y.push_back(update_ratios_[k][j]);
        }
        updates.push_back(std::move(s));
    }
    const std::string a = out_dir + "/diagnostics_activations.svg", g = out_dir + "/diagnostics_gradients.svg",
                      w = out_dir + "/diagnostics_weights.svg", u = out_dir + "/diagnostics_updates.svg",
                      csv = out_dir + "/diagnostics.csv";
    write_lines_svg(a, title + ": activations " + at, "the output of each nonlinearity, over the batch", "activation",
                    "density", acts);
    write_lines_svg(g, title + ": activation gradients " + at, "d loss / d activation, for the same outputs",
                    "gradient", "density", grads);
    write_lines_svg(w, title + ": weight gradients " + at,
                    "the 2-d parameters' gradients (grad:data = their std ratio)", "gradient", "density", weights);
    write_lines_svg(u, title + ": update:data ratio", "log10(std of each step's change / std of the weight)", "step",
                    "log10 ratio", updates, -3.0, "1e-3, the lecture's guide");

    std::string text = "kind,name,shape,step,mean,std,nonpositive,ratio\n";
    auto row = [&](const char* kind, const Named& n, double ratio) {
        text += format("%s,%s,\"%s\",%lld,%.9g,%.9g,%.9g,%.9g\n", kind, n.name.c_str(), shape_text(n.shape).c_str(),
                       static_cast<long long>(histogram_step_), n.stats.mean, n.stats.std, n.stats.nonpositive, ratio);
    };
    for (const Named& n : activation_stats_) row("activation", n, NAN);
    for (const Named& n : grad_stats_) row("activation_grad", n, NAN);
    for (const Named& n : weight_stats_) row("weight_grad", n, n.grad_to_data);
    for (size_t k = 0; k < update_steps_.size(); ++k)
        for (size_t j = 0; j < weight_names_.size(); ++j)
            text += format("update,%s,\"%s\",%lld,,,,%.9g\n", weight_names_[j].c_str(),
                           shape_text(weights_[j].sizes()).c_str(), static_cast<long long>(update_steps_[k]),
                           std::pow(10.0, update_ratios_[k][j]));
    const std::string why = internal::write_file_whole(csv, text);
    if (!why.empty()) throw std::runtime_error("cannot write '" + csv + "': " + why);
    return a + ", " + g + ", " + w + ", " + u + ", " + csv;
}

} // namespace train
