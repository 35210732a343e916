// nn::Module: the base of every layer, and the containers ModuleList and
// Sequential.
//
// A module holds state; ops hold math. A layer's constructor registers its
// parameters, buffers and submodules by name, so named_parameters() gives
// PyTorch's dotted names ("heads.0.key.weight") in registration order, and
// state_dict() / load_state_dict() move weights by those names. Modules are
// held by shared_ptr: register_module(name, std::make_shared<Linear>(...)).
// Calling a module, module(x), runs its forward between its forward hooks.
// docs/modules.md explains it; tests/test_module.cpp checks it.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/ops/ops.h"

namespace ember::nn {

class Module;

// Forward hooks, as PyTorch's register_forward_pre_hook and
// register_forward_hook: a pre-hook sees a module's input before its
// forward runs, a hook sees the input and the output after. They observe;
// they cannot replace the output (PyTorch's may).
using ForwardPreHook = std::function<void(Module& module, const Tensor& input)>;
using ForwardHook = std::function<void(Module& module, const Tensor& input, const Tensor& output)>;

} // namespace ember::nn

namespace ember::internal {
// A module's hooks, in registration order, each under an id its handle keeps.
struct ModuleHooks {
    uint64_t next_id = 0;
    std::vector<std::pair<uint64_t, nn::ForwardPreHook>> pre;
    std::vector<std::pair<uint64_t, nn::ForwardHook>> post;
};
} // namespace ember::internal

namespace ember::nn {

// What registering a hook returns (PyTorch's RemovableHandle): remove()
// unregisters the hook. Removing twice, or after the module is gone, does
// nothing; dropping the handle leaves the hook in place, as in PyTorch.
class RemovableHandle {
public:
    RemovableHandle() = default;
    RemovableHandle(std::weak_ptr<ember::internal::ModuleHooks> hooks, uint64_t id)
        : hooks_(std::move(hooks)), id_(id) {}
    void remove();

private:
    std::weak_ptr<ember::internal::ModuleHooks> hooks_;
    uint64_t id_ = 0;
};

// Name -> tensor, in insertion order (what state_dict returns).
class StateDict {
public:
    void insert(const std::string& name, const Tensor& tensor);
    bool contains(const std::string& name) const;
    // Throws ValueError naming the key if it is absent.
    const Tensor& at(const std::string& name) const;
    size_t size() const { return items_.size(); }
    auto begin() const { return items_.begin(); }
    auto end() const { return items_.end(); }

private:
    std::vector<std::pair<std::string, Tensor>> items_;
    std::unordered_map<std::string, size_t> index_; // name -> position in items_
};

class Module {
public:
    // `type_name` is what repr prints: "Linear", "Head", ...
    explicit Module(std::string type_name = "Module");
    virtual ~Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    // The computation of a module with one tensor in and one out. Modules
    // with other signatures (a GPT takes targets too) add their own.
    virtual Tensor forward(const Tensor& x);
    // Calls the module: the pre-hooks, forward(x), then the hooks. A layer
    // calls its children this way, (*key)(x), as PyTorch's self.key(x), so
    // that their hooks run; key->forward(x) skips them.
    Tensor operator()(const Tensor& x);

    // ---- hooks: run by operator(), in registration order ----------------
    RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
    RemovableHandle register_forward_hook(ForwardHook hook);

    // ---- registration: constructors call these ----------------------------
    // A trainable tensor (requires_grad is set on it, as nn.Parameter does).
    Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
    // State that is not trained, like the causal mask. A persistent buffer
    // is part of state_dict.
    Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
    template <typename M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }
    // Puts `module` in the place of the registered submodule `name`
    // (PyTorch's `block.ln1 = RMSNorm(...)`; the C++ frontend's
    // replace_module): a layer of yours inside a model built by someone
    // else. Assign the result to the member that held the old one.
    template <typename M>
    std::shared_ptr<M> replace_module(const std::string& name, std::shared_ptr<M> module) {
        replace_child(name, module);
        return module;
    }
    // Puts `tensor` in the place of the registered parameter `name`, as
    // nanoGPT's `wte.weight = lm_head.weight` ties two modules' weights:
    // the parameter is then listed once, under its first name. Assign the
    // result to the member that held the old one.
    Tensor replace_parameter(const std::string& name, Tensor tensor);

    // ---- what a module holds -------------------------------------------------
    // Parameters of this module and, recursively, its submodules, in
    // registration order, each once (a shared parameter is listed once).
    std::vector<Tensor> parameters() const;
    std::vector<std::pair<std::string, Tensor>> named_parameters() const;
    std::vector<std::pair<std::string, Tensor>> named_buffers() const;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
    // This module and all below it, pre-order, with dotted names ("" for this one).
    std::vector<std::pair<std::string, Module*>> named_modules();
    // Number of trainable values.
    int64_t num_parameters() const;

    // ---- modes and gradients -------------------------------------------------
    // Training mode (the default) makes Dropout drop; eval() turns it off,
    // recursively.
    void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }
    void zero_grad();
    // Calls fn on every submodule, children before parents (PyTorch's apply),
    // e.g. to re-initialise all Linear weights.
    void apply(const std::function<void(Module&)>& fn);
    // Converts every floating parameter and buffer to `dtype` in place (for
    // gradient checks in float64). Tensors handed out earlier see the change.
    void to(DType dtype);

    // ---- state -----------------------------------------------------------------
    // Parameters and persistent buffers by dotted name: PyTorch's order
    // (each module's parameters, then its buffers, then its submodules').
    StateDict state_dict() const;
    // Copies values in by name. Everything is checked first (missing and
    // unexpected keys when strict, every shape), so on error the module is
    // left exactly as it was.
    void load_state_dict(const StateDict& dict, bool strict = true);

    // ---- printing ---------------------------------------------------------------
    const std::string& type_name() const { return type_name_; }
    // The part between the parentheses of a leaf's repr: "in_features=32, ...".
    virtual std::string extra_repr() const { return ""; }
    // PyTorch's repr: the module tree with one line per submodule.
    std::string repr() const;

protected:
    void add_child(const std::string& name, std::shared_ptr<Module> module);
    void replace_child(const std::string& name, std::shared_ptr<Module> module);

private:
    // Throws ValueError if `module` holds this module (a cycle), naming both.
    void check_no_cycle(const std::string& name, const Module& module) const;
    void check_new_name(const std::string& name, const char* what) const;
    void collect_state(const std::string& prefix, StateDict& out) const;

    std::string type_name_;
    bool training_ = true;
    std::vector<std::pair<std::string, Tensor>> parameters_;
    std::vector<std::pair<std::string, Tensor>> buffers_;
    std::vector<std::string> non_persistent_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    std::shared_ptr<ember::internal::ModuleHooks> hooks_; // made by the first register_forward_*hook
};

std::ostream& operator<<(std::ostream& out, const Module& module);

// A list of modules registered as "0", "1", ..., like nn.ModuleList. It has
// no forward of its own: the owner decides how to use its items.
class ModuleList : public Module {
public:
    ModuleList() : Module("ModuleList") {}
    explicit ModuleList(std::vector<std::shared_ptr<Module>> modules);
    void push_back(std::shared_ptr<Module> module);
    size_t size() const { return named_children().size(); }
    std::shared_ptr<Module> operator[](size_t i) const;
    // Item i as its own type: list.at<Head>(0).
    template <typename M>
    std::shared_ptr<M> at(size_t i) const {
        auto typed = std::dynamic_pointer_cast<M>((*this)[i]);
        if (!typed)
            fail<ValueError>("ModuleList", "item ", i, " is a ", (*this)[i]->type_name(), ", not the type asked for");
        return typed;
    }

protected:
    explicit ModuleList(std::string type_name) : Module(std::move(type_name)) {}
};

// Modules applied one after another, like nn.Sequential.
class Sequential : public ModuleList {
public:
    Sequential() : ModuleList("Sequential") {}
    explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
    Tensor forward(const Tensor& x) override;
};

} // namespace ember::nn
