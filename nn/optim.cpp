// SGD, AdamW and clip_grad_norm_: see optim.h. SGD's update is PyTorch's
// tensor ops, AdamW's one loop over a parameter's elements, in the
// parameter's dtype with the scalars rounded to it as PyTorch's kernels use
// them (its fast copy: core/kernels/adamw.cpp). Tests: tests/test_optim.cpp.
#include "nn/optim.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/ops/adamw.h"
#include "core/ops/reduce.h"
#include "core/tensor/internal.h"

namespace ember::optim {

using internal::contiguous_data;

namespace {

void check_params(const std::vector<Tensor>& params, const char* op) {
    if (params.empty()) fail<ValueError>(op, "got an empty parameter list");
    for (size_t i = 0; i < params.size(); ++i) {
        if (!params[i].defined() || !params[i].is_leaf() || !params[i].is_floating_point())
            fail<ValueError>(op, "parameter ", i, " must be a defined floating-point leaf tensor");
        if (!params[i].is_contiguous())
            fail<ValueError>(op, "parameter ", i, " of shape ", params[i].shape(), " is not contiguous");
    }
}

// A parameter's gradient as a contiguous tensor of its dtype.
Tensor grad_of(const Tensor& p) { return contiguous_data(p.grad().to(p.dtype())); }

// state.at(name), checked against the parameter it belongs to.
Tensor state_tensor(const nn::StateDict& state, const std::string& name, const Tensor& like, const char* op) {
    if (!state.contains(name)) fail<ValueError>(op, "state has no \"", name, "\"");
    const Tensor& t = state.at(name);
    if (t.shape() != like.shape())
        fail<ShapeError>(op, "state \"", name, "\" has shape ", t.shape(), ", its parameter ", like.shape());
    return t.detach().to(like.dtype()).clone();
}

} // namespace

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {}

void Optimizer::zero_grad() {
    for (const Tensor& p : params_) p.zero_grad();
}

// ---- SGD -------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params)), options(o) {
    check_params(params_, "SGD");
    if (!(o.lr >= 0) || !(o.momentum >= 0) || !(o.weight_decay >= 0))
        fail<ValueError>("SGD", "lr, momentum and weight_decay must be non-negative");
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
        fail<ValueError>("SGD", "Nesterov momentum requires a momentum and zero dampening");
    momentum_buffer_.resize(params_.size());
}

void SGD::step() {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
        Tensor p = params_[i];
        if (!p.grad().defined()) continue;
        Tensor g = grad_of(p);
        // PyTorch: d_p = grad.add(p, alpha=weight_decay)
        if (options.weight_decay != 0) g = g + p.detach() * options.weight_decay;
        if (options.momentum != 0) {
            Tensor& buf = momentum_buffer_[i];
            if (!buf.defined()) {
                buf = g.clone(); // the first step starts the buffer at the gradient
            } else {
                buf.mul_(options.momentum).add_(g * (1.0 - options.dampening));
            }
            g = options.nesterov ? g + buf * options.momentum : buf;
        }
        p.sub_(g * options.lr);
    }
}

nn::StateDict SGD::state_dict() const {
    nn::StateDict state;
    for (size_t i = 0; i < params_.size(); ++i)
        if (momentum_buffer_[i].defined()) state.insert(std::to_string(i) + ".momentum_buffer", momentum_buffer_[i]);
    return state;
}

void SGD::load_state_dict(const nn::StateDict& state) {
    std::vector<Tensor> buffers(params_.size());
    size_t used = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
        std::string name = std::to_string(i) + ".momentum_buffer";
        if (!state.contains(name)) continue;
        buffers[i] = state_tensor(state, name, params_[i], "SGD");
        ++used;
    }
    if (used != state.size())
        fail<ValueError>("SGD", "the state has ", state.size() - used, " entries that match none of its ",
                         params_.size(), " parameters");
    momentum_buffer_ = std::move(buffers);
}

// ---- AdamW -----------------------------------------------------------------------------------

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o) : Optimizer(std::move(params)), options(o) {
    check_params(params_, "AdamW");
    if (!(o.lr >= 0) || !(o.eps >= 0) || !(o.weight_decay >= 0))
        fail<ValueError>("AdamW", "lr, eps and weight_decay must be non-negative");
    if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
        fail<ValueError>("AdamW", "betas must be in [0, 1), got ", o.beta1, " and ", o.beta2);
    state_.resize(params_.size());
    weight_decay_.assign(params_.size(), NAN);
}

namespace {
std::vector<Tensor> all_params(const std::vector<AdamWParamGroup>& groups) {
    std::vector<Tensor> all;
    for (const AdamWParamGroup& g : groups) all.insert(all.end(), g.params.begin(), g.params.end());
    return all;
}
} // namespace

AdamW::AdamW(const std::vector<AdamWParamGroup>& groups, AdamWOptions o) : AdamW(all_params(groups), o) {
    size_t i = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
        if (!(groups[g].weight_decay >= 0))
            fail<ValueError>("AdamW", "param group ", g, ": weight_decay must be non-negative, got ",
                             groups[g].weight_decay);
        for (size_t k = 0; k < groups[g].params.size(); ++k) weight_decay_[i++] = groups[g].weight_decay;
    }
}

namespace {

// Whether the bytes [a, a + an) and [b, b + bn) meet.
bool meet(const void* a, size_t an, const void* b, size_t bn) {
    const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
    return x < y + bn && y < x + an;
}

// Whether one slice writes what another reads or writes (a parameter
// listed twice, or one parameter's gradient another's data): one parallel
// loop over all of them would then race, so they run one after another.
template <typename T>
bool slices_overlap(const std::vector<internal::AdamWSlice<T>>& slices) {
    const auto bytes = [](const internal::AdamWSlice<T>& s) { return static_cast<size_t>(s.n) * sizeof(T); };
    for (size_t i = 0; i < slices.size(); ++i)
        for (size_t j = 0; j < slices.size(); ++j)
            if (i != j && (meet(slices[i].param, bytes(slices[i]), slices[j].param, bytes(slices[j])) ||
                           meet(slices[i].param, bytes(slices[i]), slices[j].grad, bytes(slices[j]))))
                return true;
    return false;
}

// The step's updates: with the fast kernels, all slices in one parallel
// loop (core/kernels/adamw.cpp, `together`); otherwise core/ops/adamw.h's
// loop one slice after another.
template <typename T>
void update_all(const std::vector<internal::AdamWSlice<T>>& slices, bool together) {
    if constexpr (internal::kFastKernelsBuilt) {
        if (together && !slices.empty()) return internal::fast::adamw_update_all(slices);
    }
    for (const internal::AdamWSlice<T>& s : slices)
        internal::adamw_update_loop(s.param, s.grad, s.exp_avg, s.exp_avg_sq, s.n, s.scalars);
}

} // namespace

void AdamW::step() {
    NoGradGuard no_grad;
    // First each parameter's state and this step's scalars, then the
    // updates, all parameters together (update_all). The state is kept
    // aside until the updates have run, so that a step that throws (out of
    // memory) changes nothing.
    std::vector<std::pair<size_t, State>> next; // each updated parameter's index and state after this step
    std::vector<Tensor> grads;                  // each update's gradient, kept alive until it has run
    std::vector<internal::AdamWSlice<float>> floats;
    std::vector<internal::AdamWSlice<double>> doubles;
    for (size_t i = 0; i < params_.size(); ++i) {
        const Tensor& p = params_[i];
        if (!p.grad().defined()) continue;
        State s = state_[i];
        if (!s.exp_avg.defined()) {
            s.exp_avg = zeros_like(p);
            s.exp_avg_sq = zeros_like(p);
        } else if (s.exp_avg.dtype() != p.dtype()) { // the module was converted since
            s.exp_avg = s.exp_avg.to(p.dtype());
            s.exp_avg_sq = s.exp_avg_sq.to(p.dtype());
        }
        ++s.step;
        // The step's scalars, in double as PyTorch's Python computes them.
        const double bias_correction1 = 1 - std::pow(options.beta1, static_cast<double>(s.step));
        const double bias_correction2 = 1 - std::pow(options.beta2, static_cast<double>(s.step));
        const double step_size = options.lr / bias_correction1;
        const double bias_correction2_sqrt = std::sqrt(bias_correction2);
        const double weight_decay = std::isnan(weight_decay_[i]) ? options.weight_decay : weight_decay_[i];
        grads.push_back(grad_of(p));
        const Tensor& g = grads.back();
        dispatch_floating(p.dtype(), "AdamW", [&]<typename T>(TypeTag<T>) {
            // Each Python float becomes the tensor's dtype where it meets a tensor.
            const internal::AdamWScalars<T> scalars{
                .decay = static_cast<T>(1 - options.lr * weight_decay),
                .beta1 = static_cast<T>(options.beta1),
                .one_minus_beta1 = static_cast<T>(1 - options.beta1),
                .beta2 = static_cast<T>(options.beta2),
                .one_minus_beta2 = static_cast<T>(1 - options.beta2),
                .bias_correction2_sqrt = static_cast<T>(bias_correction2_sqrt),
                .eps = static_cast<T>(options.eps),
                .neg_step_size = static_cast<T>(-step_size),
            };
            const internal::AdamWSlice<T> slice{
                p.data_ptr<T>(), g.data_ptr<T>(), s.exp_avg.data_ptr<T>(), s.exp_avg_sq.data_ptr<T>(),
                p.numel(),       scalars};
            if constexpr (std::is_same_v<T, float>) floats.push_back(slice);
            else doubles.push_back(slice);
        });
        next.emplace_back(i, std::move(s));
    }
    // Decided before the first update, so that nothing can throw between them.
    const bool fast = internal::use_fast_kernels();
    const bool floats_together = fast && !slices_overlap(floats), doubles_together = fast && !slices_overlap(doubles);
    update_all(floats, floats_together);
    update_all(doubles, doubles_together);
    for (auto& [i, s] : next) {
        state_[i] = std::move(s);
        internal::bump_version(params_[i]);
    }
}

nn::StateDict AdamW::state_dict() const {
    nn::StateDict state;
    for (size_t i = 0; i < params_.size(); ++i) {
        if (!state_[i].exp_avg.defined()) continue; // not updated yet: no state, as PyTorch
        std::string key = std::to_string(i);
        state.insert(key + ".step", scalar_tensor(state_[i].step));
        state.insert(key + ".exp_avg", state_[i].exp_avg);
        state.insert(key + ".exp_avg_sq", state_[i].exp_avg_sq);
    }
    return state;
}

void AdamW::load_state_dict(const nn::StateDict& state) {
    // Check everything first: the optimiser keeps its state if anything is wrong.
    std::vector<State> loaded(params_.size());
    size_t used = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
        std::string key = std::to_string(i);
        if (!state.contains(key + ".step")) continue;
        const Tensor& step = state.at(key + ".step");
        if (step.numel() != 1 || step.dtype() != kInt64 || step.item<int64_t>() < 0)
            fail<ValueError>("AdamW", "state \"", key, ".step\" must be one non-negative int64");
        loaded[i].step = step.item<int64_t>();
        loaded[i].exp_avg = state_tensor(state, key + ".exp_avg", params_[i], "AdamW");
        loaded[i].exp_avg_sq = state_tensor(state, key + ".exp_avg_sq", params_[i], "AdamW");
        used += 3;
    }
    if (used != state.size())
        fail<ValueError>("AdamW", "the state has ", state.size() - used, " entries that match none of its ",
                         params_.size(), " parameters");
    state_ = std::move(loaded);
}

// ---- clip_grad_norm_ ---------------------------------------------------------------------------------

namespace {

// sum(g.to(kFloat64) * g.to(kFloat64)) without the two copies: the square
// of a float is exact in double, and fold_reduced adds the squares in the
// order sum() adds a tensor's elements, so the result has sum's bits.
double sum_of_squares(const Tensor& g) {
    const internal::ReduceGeometry geometry = internal::reduce_geometry(g, {}, false, "clip_grad_norm_");
    double total = 0;
    dispatch_floating(g.dtype(), "clip_grad_norm_", [&]<typename T>(TypeTag<T>) {
        internal::fold_reduced<T, double>(
            g, geometry, 0.0, [](double acc, T v, int64_t) { return acc + double(v) * double(v); },
            [](double a, double b) { return a + b; }, [&total](int64_t, double acc) { total = acc; });
    });
    return total;
}

// Every gradient's sum of squares (0 for a missing one): by the
// definition above, or with the fast kernels (core/kernels/sum_of_squares.cpp)
// eight chunks at a time with the same bits; a gradient that is not
// contiguous always goes through the definition.
std::vector<double> sums_of_squares(const std::vector<Tensor>& grads) {
    std::vector<double> total(grads.size(), 0.0);
    const bool fast = internal::use_fast_kernels(); // false in a reference build
    if constexpr (internal::kFastKernelsBuilt)
        if (fast) internal::fast::sums_of_squares(grads, total);
    for (size_t i = 0; i < grads.size(); ++i)
        if (grads[i].defined() && !(fast && grads[i].is_contiguous())) total[i] = sum_of_squares(grads[i]);
    return total;
}

} // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
    if (!(norm_type == 2.0 || std::isinf(norm_type)))
        fail<ValueError>("clip_grad_norm_", "norm_type must be 2 or infinity, got ", norm_type);
    if (!(max_norm >= 0)) fail<ValueError>("clip_grad_norm_", "max_norm must be non-negative, got ", max_norm);
    NoGradGuard no_grad;
    // total = || (||g_1||, ||g_2||, ...) ||, which for the 2-norm is the
    // 2-norm of all gradient elements together.
    std::vector<Tensor> grads;
    for (const Tensor& p : params) grads.push_back(p.grad());
    const std::vector<double> squares = std::isinf(norm_type) ? std::vector<double>() : sums_of_squares(grads);
    double total = 0;
    for (size_t i = 0; i < grads.size(); ++i) {
        if (!grads[i].defined()) continue;
        double norm = std::isinf(norm_type) ? max(abs(grads[i].to(kFloat64))).item<double>() : std::sqrt(squares[i]);
        total = std::isinf(norm_type) ? std::max(total, norm) : total + norm * norm;
    }
    if (!std::isinf(norm_type)) total = std::sqrt(total);
    // PyTorch multiplies every gradient by min(1, max_norm / (total + 1e-6));
    // a NaN norm stays NaN (and so do the gradients), as with torch.clamp.
    double coef = max_norm / (total + 1e-6);
    if (coef > 1.0) coef = 1.0;
    // Multiplying by 1 changes no bit, so unclipped gradients are left alone
    // (train_gpt measures the norm every step, clipping or not).
    if (coef != 1.0)
        for (const Tensor& p : params)
            if (p.grad().defined()) p.grad().mul_(coef);
    return total;
}

} // namespace ember::optim
