// nn::Module, ModuleList, Sequential: see module.h. Tests: tests/test_module.cpp.
#include "nn/module.h"

#include <algorithm>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/autograd/autograd.h"

namespace ember::nn {

// ---- StateDict ------------------------------------------------------------------------

void StateDict::insert(const std::string& name, const Tensor& tensor) {
    if (!index_.emplace(name, items_.size()).second) fail<ValueError>("StateDict", "duplicate key \"", name, "\"");
    items_.emplace_back(name, tensor);
}

bool StateDict::contains(const std::string& name) const { return index_.count(name) > 0; }

const Tensor& StateDict::at(const std::string& name) const {
    auto it = index_.find(name);
    if (it == index_.end()) fail<ValueError>("StateDict", "no key \"", name, "\"");
    return items_[it->second].second;
}

// ---- registration ------------------------------------------------------------------------

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor& x) {
    fail<Error>(type_name_, "has no forward(x) taking one tensor (input ", x.shape(), ")");
}

void Module::check_new_name(const std::string& name, const char* what) const {
    if (name.empty() || name.find('.') != std::string::npos)
        fail<ValueError>(type_name_, what, " name \"", name, "\" must be non-empty and contain no '.'");
    auto taken = [&](const auto& list) {
        return std::any_of(list.begin(), list.end(), [&](const auto& item) { return item.first == name; });
    };
    if (taken(parameters_) || taken(buffers_) || taken(children_))
        fail<ValueError>(type_name_, "\"", name, "\" is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
    check_new_name(name, "parameter");
    if (!tensor.defined()) fail<ValueError>(type_name_, "parameter \"", name, "\" is undefined");
    if (!tensor.is_leaf()) tensor = tensor.detach(); // a parameter starts a graph; it never comes from one
    tensor.requires_grad_(requires_grad);
    parameters_.emplace_back(name, tensor);
    return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
    check_new_name(name, "buffer");
    if (!tensor.defined()) fail<ValueError>(type_name_, "buffer \"", name, "\" is undefined");
    buffers_.emplace_back(name, tensor);
    if (!persistent) non_persistent_.push_back(name);
    return tensor;
}

namespace {

// The dotted path from `root` down to `target` among root's submodules
// ("" for root itself), or nothing if target is not inside root.
std::optional<std::string> path_to(const Module& root, const Module* target) {
    if (&root == target) return "";
    for (const auto& [name, child] : root.named_children())
        if (auto below = path_to(*child, target)) return below->empty() ? name : name + "." + *below;
    return std::nullopt;
}

} // namespace

void Module::check_no_cycle(const std::string& name, const Module& module) const {
    // A module inside itself: the shared_ptrs would hold each other, and
    // neither would ever be freed (and parameters() would never end).
    if (auto path = path_to(module, this))
        fail<ValueError>(type_name_, "submodule \"", name, "\" (", module.type_name_, ") holds this ", type_name_,
                         path->empty() ? std::string(" itself") : " as its submodule \"" + *path + "\"",
                         ": a module cannot be inside itself");
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
    check_new_name(name, "submodule");
    if (!module) fail<ValueError>(type_name_, "submodule \"", name, "\" is null");
    check_no_cycle(name, *module);
    children_.emplace_back(name, std::move(module));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> module) {
    if (!module) fail<ValueError>(type_name_, "replace_module: the new \"", name, "\" is null");
    check_no_cycle(name, *module);
    for (auto& [child_name, child] : children_)
        if (child_name == name) {
            child = std::move(module);
            return;
        }
    fail<ValueError>(type_name_, "replace_module: there is no submodule \"", name, "\" to replace");
}

Tensor Module::replace_parameter(const std::string& name, Tensor tensor) {
    if (!tensor.defined()) fail<ValueError>(type_name_, "replace_parameter: the new \"", name, "\" is undefined");
    for (auto& [parameter_name, p] : parameters_)
        if (parameter_name == name) {
            if (!tensor.is_leaf()) tensor = tensor.detach(); // as register_parameter
            if (!tensor.requires_grad()) tensor.requires_grad_(true);
            p = tensor;
            return tensor;
        }
    fail<ValueError>(type_name_, "replace_parameter: there is no parameter \"", name, "\" to replace");
}

// ---- calling, and hooks ---------------------------------------------------------------------

Tensor Module::operator()(const Tensor& x) {
    if (!hooks_) return forward(x);
    // Copies of the lists, so that a hook may remove itself (or register
    // another) while they run; the change applies from the next call.
    auto pre = hooks_->pre;
    for (auto& [id, hook] : pre) hook(*this, x);
    Tensor out = forward(x);
    auto post = hooks_->post;
    for (auto& [id, hook] : post) hook(*this, x, out);
    return out;
}

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
    if (!hook) fail<ValueError>(type_name_, "register_forward_pre_hook was given an empty function");
    if (!hooks_) hooks_ = std::make_shared<ember::internal::ModuleHooks>();
    uint64_t id = hooks_->next_id++;
    hooks_->pre.emplace_back(id, std::move(hook));
    return RemovableHandle(hooks_, id);
}

RemovableHandle Module::register_forward_hook(ForwardHook hook) {
    if (!hook) fail<ValueError>(type_name_, "register_forward_hook was given an empty function");
    if (!hooks_) hooks_ = std::make_shared<ember::internal::ModuleHooks>();
    uint64_t id = hooks_->next_id++;
    hooks_->post.emplace_back(id, std::move(hook));
    return RemovableHandle(hooks_, id);
}

void RemovableHandle::remove() {
    auto hooks = hooks_.lock();
    if (!hooks) return; // the module is gone, and its hooks with it
    std::erase_if(hooks->pre, [this](const auto& item) { return item.first == id_; });
    std::erase_if(hooks->post, [this](const auto& item) { return item.first == id_; });
    hooks_.reset();
}

// ---- traversal -------------------------------------------------------------------------------

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
    // Pre-order: this module, then each child's subtree, in registration
    // order; a module registered twice is listed once, as in PyTorch.
    std::vector<std::pair<std::string, Module*>> out;
    std::set<const Module*> seen;
    std::vector<std::pair<std::string, Module*>> stack{{"", this}};
    while (!stack.empty()) {
        auto [prefix, module] = stack.back();
        stack.pop_back();
        if (!seen.insert(module).second) continue;
        out.emplace_back(prefix, module);
        const auto& children = module->children_;
        for (auto it = children.rbegin(); it != children.rend(); ++it)
            stack.emplace_back(prefix.empty() ? it->first : prefix + "." + it->first, it->second.get());
    }
    return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
    std::vector<std::pair<std::string, Tensor>> out;
    std::set<const TensorImpl*> seen;
    for (const auto& [prefix, module] : const_cast<Module*>(this)->named_modules())
        for (const auto& [name, p] : module->parameters_)
            if (seen.insert(p.impl()).second) out.emplace_back(prefix.empty() ? name : prefix + "." + name, p);
    return out;
}

std::vector<Tensor> Module::parameters() const {
    std::vector<Tensor> out;
    for (const auto& [name, p] : named_parameters()) out.push_back(p);
    return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& [prefix, module] : const_cast<Module*>(this)->named_modules())
        for (const auto& [name, b] : module->buffers_) out.emplace_back(prefix.empty() ? name : prefix + "." + name, b);
    return out;
}

int64_t Module::num_parameters() const {
    int64_t n = 0;
    for (const Tensor& p : parameters()) n += p.numel();
    return n;
}

// ---- modes -----------------------------------------------------------------------------------

void Module::train(bool on) {
    training_ = on;
    for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
    for (const Tensor& p : parameters()) p.zero_grad();
}

void Module::apply(const std::function<void(Module&)>& fn) {
    // Children first, then this module; a module registered in several
    // places is visited once (an initialiser must not draw for it twice).
    std::set<const Module*> seen;
    std::function<void(Module&)> visit = [&](Module& m) {
        if (!seen.insert(&m).second) return;
        for (auto& [name, child] : m.children_) visit(*child);
        fn(m);
    };
    visit(*this);
}

void Module::to(DType dtype) {
    if (!is_floating(dtype))
        fail<DTypeError>("Module.to", type_name_, ": only floating dtypes (float32, float64), got ", dtype_name(dtype));
    // Rewrites each tensor's TensorImpl in place, so every handle to it (the
    // layer's `weight` member, an outside reference, an optimiser) sees the
    // new dtype. An accumulated gradient is converted along with it.
    NoGradGuard no_grad;
    auto convert = [dtype](const Tensor& t) {
        if (!t.is_floating_point() || t.dtype() == dtype) return;
        Tensor converted = t.detach().to(dtype).contiguous();
        TensorImpl* impl = t.impl();
        if (impl->grad) impl->grad = Tensor(impl->grad).to(dtype).contiguous().impl_ptr();
        impl->storage = converted.storage();
        impl->dtype = dtype;
        impl->strides = converted.strides();
        impl->offset = converted.storage_offset();
    };
    for (const auto& [prefix, module] : named_modules()) {
        for (auto& [name, p] : module->parameters_) convert(p);
        for (auto& [name, b] : module->buffers_) convert(b);
    }
}

// ---- state -----------------------------------------------------------------------------------

void Module::collect_state(const std::string& prefix, StateDict& out) const {
    for (const auto& [name, p] : parameters_) out.insert(prefix + name, p.detach());
    for (const auto& [name, b] : buffers_)
        if (std::find(non_persistent_.begin(), non_persistent_.end(), name) == non_persistent_.end())
            out.insert(prefix + name, b.detach());
    for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

StateDict Module::state_dict() const {
    StateDict out;
    collect_state("", out);
    return out;
}

void Module::load_state_dict(const StateDict& dict, bool strict) {
    StateDict own = state_dict();
    // Check everything before changing anything.
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& [name, t] : own) {
        if (!dict.contains(name)) {
            missing.push_back(name);
        } else if (dict.at(name).shape() != t.shape()) {
            mismatched.push_back(name + ": the file has " + shape_str(dict.at(name).shape()) + ", the model " +
                                 shape_str(t.shape()));
        }
    }
    for (const auto& [name, t] : dict)
        if (!own.contains(name)) unexpected.push_back(name);
    auto list = [](const std::vector<std::string>& names) {
        std::string s;
        for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
        return s;
    };
    if (!mismatched.empty()) fail<ShapeError>("load_state_dict", type_name_, ": size mismatch for ", list(mismatched));
    for (const auto& [name, t] : own)
        for (int64_t d = 0; d < t.dim(); ++d)
            if (t.strides()[d] == 0 && t.shape()[d] > 1)
                fail<ValueError>("load_state_dict", type_name_, ": ", name, " is an expanded tensor of shape ",
                                 t.shape(), " and cannot be written in place");
    if (strict && (!missing.empty() || !unexpected.empty()))
        fail<ValueError>("load_state_dict", type_name_, ":", missing.empty() ? "" : " missing keys: " + list(missing),
                         missing.empty() || unexpected.empty() ? "" : ";",
                         unexpected.empty() ? "" : " unexpected keys: " + list(unexpected));
    NoGradGuard no_grad;
    for (const auto& [name, t] : own)
        if (dict.contains(name)) {
            Tensor target = t; // a handle to the module's own tensor
            target.copy_(dict.at(name));
        }
}

// ---- printing ------------------------------------------------------------------------------------

std::string Module::repr() const {
    // PyTorch's Module.__repr__: "Name(extra)" for a leaf; otherwise the
    // extra lines and one "(name): child" line each, indented by two.
    std::vector<std::string> lines;
    std::string extra = extra_repr();
    std::vector<std::string> extra_lines;
    if (!extra.empty()) {
        std::stringstream in(extra);
        std::string line;
        while (std::getline(in, line)) extra_lines.push_back(line);
    }
    std::vector<std::string> child_lines;
    for (const auto& [name, child] : children_) {
        std::string text = child->repr();
        // Indent every line but the first by two spaces.
        std::string indented;
        for (char c : text) {
            indented += c;
            if (c == '\n') indented += "  ";
        }
        child_lines.push_back("(" + name + "): " + indented);
    }
    std::string out = type_name_ + "(";
    if (extra_lines.size() == 1 && child_lines.empty()) {
        out += extra_lines[0];
    } else if (!extra_lines.empty() || !child_lines.empty()) {
        out += "\n";
        for (const auto& l : extra_lines) out += "  " + l + "\n";
        for (const auto& l : child_lines) out += "  " + l + "\n";
    }
    return out + ")";
}

std::ostream& operator<<(std::ostream& out, const Module& module) { return out << module.repr(); }

// ---- containers ----------------------------------------------------------------------------------

ModuleList::ModuleList(std::vector<std::shared_ptr<Module>> modules) : Module("ModuleList") {
    for (auto& m : modules) push_back(std::move(m));
}

void ModuleList::push_back(std::shared_ptr<Module> module) { add_child(std::to_string(size()), std::move(module)); }

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
    if (i >= size()) fail<IndexError>(type_name(), "index ", i, " is out of range for ", size(), " modules");
    return named_children()[i].second;
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) : ModuleList("Sequential") {
    for (auto& m : modules) push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
    Tensor out = x;
    for (const auto& [name, module] : named_children()) out = (*module)(out);
    return out;
}

} // namespace ember::nn
