// Reverse-mode autograd: graph nodes, saved tensors, grad mode, the engine.
//
// An op whose inputs require grad records a Node: its backward function, with
// one edge per input to the node that produced that input (null where an input
// needs no gradient). A leaf that requires grad is reached through an
// AccumulateGrad node that adds into its .grad. backward() walks the graph
// without recursion, runs each node once all of its gradient contributions are
// summed, and then frees what the nodes saved. A node never owns the tensor it
// produced, so the graph has no ownership cycles and is freed with its output.
// docs/autograd.md derives all of this; tests/test_autograd.cpp checks it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember {

// What a backward function returns: one gradient per input, in input order;
// an undefined Tensor stands for "no gradient" (zero, or not needed).
using Grads = std::vector<Tensor>;

class Node {
public:
    // `inputs` are the op's inputs; the node keeps their edges and shapes.
    explicit Node(const std::vector<Tensor>& inputs);
    virtual ~Node();
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    // "MulBackward0", "AccumulateGrad", ...: PyTorch's names where they exist.
    virtual std::string name() const = 0;
    // The gradients of the inputs, given dout: the gradient of the output.
    virtual Grads apply(const Tensor& dout) = 0;
    // A node with several outputs (split's pieces, one node for all, as in
    // PyTorch) receives their gradients together, one per output, an
    // undefined one for an output that got none.
    virtual size_t num_outputs() const { return 1; }
    virtual Grads apply_outputs(const std::vector<Tensor>& douts) { return apply(douts[0]); }
    // Frees what backward needed; called after a backward without retain_graph.
    virtual void release() { released_ = true; }
    bool released() const { return released_; }

    // The next nodes, one per input (null when that input needs no grad).
    const std::vector<std::shared_ptr<Node>>& next_functions() const { return next_; }
    // Which output of next_functions()[i] input i is (0 unless that node has several).
    uint32_t next_output_nr(size_t i) const { return next_output_nr_[i]; }
    bool needs_input_grad(size_t i) const { return i < next_.size() && next_[i] != nullptr; }
    const Shape& input_shape(size_t i) const { return input_shapes_[i]; }
    DType input_dtype(size_t i) const { return input_dtypes_[i]; }
    // Creation order; the engine runs later nodes first, as PyTorch does.
    uint64_t sequence_nr() const { return sequence_nr_; }

    // Set by Tensor::retain_grad on a non-leaf: those of the node's outputs
    // receive their dout. Weak, so the node does not own its outputs.
    std::vector<std::weak_ptr<TensorImpl>> retained_outputs;

    // Number of Nodes alive in this process (tests use it to prove graphs are freed).
    static int64_t live_count();

private:
    std::vector<std::shared_ptr<Node>> next_;
    std::vector<uint32_t> next_output_nr_;
    std::vector<Shape> input_shapes_;
    std::vector<DType> input_dtypes_;
    uint64_t sequence_nr_;
    bool released_ = false;
};

// The backward of a built-in op: a closure over the values the op saved.
using BackwardFn = std::function<Grads(const Tensor& dout)>;

// The node every built-in op records: a name and a backward closure. Release
// destroys the closure, and with it everything it saved.
class FunctionNode : public Node {
public:
    FunctionNode(std::string name, const std::vector<Tensor>& inputs, BackwardFn backward);
    std::string name() const override { return name_; }
    Grads apply(const Tensor& dout) override;
    void release() override;

private:
    std::string name_;
    BackwardFn backward_;
};

// The node behind a leaf that requires grad: adds dout into leaf.grad.
class AccumulateGrad : public Node {
public:
    explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
    std::string name() const override { return "AccumulateGrad"; }
    Grads apply(const Tensor& dout) override;
    void release() override {} // holds nothing worth freeing; stays usable
    // The leaf itself (PyTorch: grad_fn.next_functions[0][0].variable).
    Tensor variable() const { return Tensor(leaf_); }

private:
    std::shared_ptr<TensorImpl> leaf_;
};

// A tensor saved for backward: its data without its history (saving the
// history could make a node own itself), plus the storage version at saving
// time, so that get() can refuse data that an in-place op has overwritten.
class SavedTensor {
public:
    SavedTensor() = default;
    explicit SavedTensor(const Tensor& tensor);
    const Tensor& get() const;

private:
    Tensor data_;
    uint64_t version_ = 0;
};

// Whether ops record the graph (per thread). On by default; NoGradGuard
// turns it off for a scope (optimizer steps, evaluation), like
// torch.no_grad().
class GradMode {
public:
    static bool is_enabled();
    static void set_enabled(bool enabled);
};

// Grad mode set to `enabled` for a scope, then back to what it was:
// PyTorch's AutoGradMode. { AutoGradMode grad(true); ... } records even
// inside a backward pass (activation checkpointing does).
class AutoGradMode {
public:
    explicit AutoGradMode(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
    ~AutoGradMode() { GradMode::set_enabled(previous_); }
    AutoGradMode(const AutoGradMode&) = delete;
    AutoGradMode& operator=(const AutoGradMode&) = delete;

private:
    bool previous_;
};

// Recording off for a scope, as torch.no_grad(): { NoGradGuard no_grad; ... }
struct NoGradGuard : AutoGradMode {
    NoGradGuard() : AutoGradMode(false) {}
};

// ---- for op implementations -------------------------------------------------

// A view taken before an in-place op rewrote the history of the tensor it
// views still carries the old history: its gradient would be wrong. Using such
// a view in a graph throws an AutogradError (take the view again instead).
[[noreturn]] void fail_stale_view(const Tensor& view);
inline void check_view_history(const Tensor& t) {
    if (t.defined() && t.impl()->view_base && t.impl()->view_history_version != t.storage()->history_version())
        fail_stale_view(t);
}

// True when grad mode is on and any (defined) input requires grad, i.e. the
// op must record a node: `if (needs_grad(a, b)) attach(...)`.
template <typename... Ts>
bool needs_grad(const Ts&... inputs) {
    if (!GradMode::is_enabled()) return false;
    (check_view_history(inputs), ...);
    return ((inputs.defined() && inputs.requires_grad()) || ...);
}
bool needs_grad(const std::vector<Tensor>& inputs);

// Makes `out` (a fresh result) the output of `node`: its history, and
// requires_grad. Every op records itself this way.
void attach(const Tensor& out, std::shared_ptr<Node> node);
// The same for the several outputs of one node (outs[i] is its output i).
void attach_outputs(const std::vector<Tensor>& outs, const std::shared_ptr<Node>& node);
// The same with a new FunctionNode over `inputs`: what built-in ops record.
void attach(const Tensor& out, std::string name, const std::vector<Tensor>& inputs, BackwardFn backward);

// In-place ops: check_inplace refuses what autograd cannot follow (a leaf that
// requires grad; a view whose history would have to change); attach_inplace
// then makes `self`'s new history a node whose first input is `self`'s old one.
void check_inplace(const Tensor& self, const char* op, bool result_needs_grad);
void attach_inplace(const Tensor& self, std::string name, const std::vector<Tensor>& inputs, BackwardFn backward);

// For an in-place op that overwrites every value of `self` with values that
// do not depend on anything in the graph (fill_, zero_, normal_, ...): in the
// graph, `self`'s history becomes a node that passes back a zero gradient,
// as PyTorch's FillBackward does.
void record_overwrite(const Tensor& self, const char* grad_name);

// The node a gradient for `tensor` must flow into: its grad_fn, or for a leaf
// that requires grad its AccumulateGrad node; null if it needs no grad.
std::shared_ptr<Node> gradient_edge(const Tensor& tensor);

// The engine: backpropagates `gradient` from `root` (Tensor::backward calls this).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

} // namespace ember
