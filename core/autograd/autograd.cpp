// The autograd engine (run_backward, first), then what it runs on: nodes,
// saved tensors, grad mode, how ops record themselves, and the Tensor
// methods that drive it all. See autograd.h for the design; docs/autograd.md
// for the derivation and a worked example. The rules for in-place ops and
// views are in inplace.cpp. Tests: tests/test_autograd.cpp.
#include "core/autograd/autograd.h"

#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/ops/ops.h"

namespace ember {

// ---- the engine -------------------------------------------------------------------

// Adds a gradient contribution into a node's pending input.
static void accumulate(Tensor& pending, const Tensor& grad) {
    if (!grad.defined()) return;
    pending = pending.defined() ? add(pending, grad) : grad;
}

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
    if (!root.requires_grad())
        fail<AutogradError>("backward", "tensor of shape ", root.shape(),
                            " does not require grad and has no grad_fn: nothing to differentiate "
                            "(did you forget requires_grad_() on a parameter, or run under NoGradGuard?)");
    Tensor dout = gradient;
    if (!dout.defined()) {
        if (root.numel() != 1)
            fail<AutogradError>("backward",
                                "grad can be implicitly created only for a scalar output, "
                                "but the output has shape ",
                                root.shape(), "; pass a gradient of that shape");
        dout = ones_like(root);
    } else if (dout.shape() != root.shape()) {
        fail<ShapeError>("backward", "gradient has shape ", dout.shape(), " but the output has shape ", root.shape());
    } else if (dout.dtype() != root.dtype()) {
        dout = dout.to(root.dtype());
    }

    // Backward passes compute with plain tensors: nothing they do is recorded.
    NoGradGuard no_grad;
    std::shared_ptr<Node> root_node = gradient_edge(root);

    // 1. Count, for every reachable node, how many edges point at it: a node
    //    may run only once all of those have delivered their gradient. An
    //    explicit stack instead of recursion, so any depth works.
    std::unordered_map<Node*, int64_t> dependencies;
    {
        std::vector<Node*> stack{root_node.get()};
        std::unordered_set<Node*> seen{root_node.get()};
        while (!stack.empty()) {
            Node* node = stack.back();
            stack.pop_back();
            for (const auto& next : node->next_functions()) {
                if (!next) continue;
                ++dependencies[next.get()];
                if (seen.insert(next.get()).second) stack.push_back(next.get());
            }
        }
    }

    // 2. Run nodes whose dependencies are all met, latest-created first (a
    //    topological order, and the order PyTorch uses). Each node's summed
    //    gradients, one per output, wait in `pending` until it runs.
    std::unordered_map<Node*, std::vector<Tensor>> pending;
    auto pending_of = [&pending](Node* node) -> std::vector<Tensor>& {
        std::vector<Tensor>& douts = pending[node];
        if (douts.empty()) douts.resize(node->num_outputs());
        return douts;
    };
    pending_of(root_node.get())[root.impl()->grad_fn ? root.impl()->output_nr : 0] = dout;
    auto later_first = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
    std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
    ready.push(root_node.get());

    while (!ready.empty()) {
        Node* node = ready.top();
        ready.pop();
        std::vector<Tensor> douts = std::move(pending_of(node));
        pending.erase(node);

        Grads grads;
        if (std::any_of(douts.begin(), douts.end(), [](const Tensor& t) { return t.defined(); })) {
            for (const auto& retained : node->retained_outputs) {
                auto out = retained.lock();
                if (!out || !douts[out->output_nr].defined()) continue;
                Tensor kept(out);
                if (!out->grad) kept.set_grad(douts[out->output_nr].clone());
                else kept.grad().add_(douts[out->output_nr]);
            }
            grads = douts.size() == 1 ? node->apply(douts[0]) : node->apply_outputs(douts);
            if (!retain_graph) node->release();
        }

        const auto& next = node->next_functions();
        if (!grads.empty() && grads.size() != next.size())
            fail<AutogradError>("backward", node->name(), " returned ", grads.size(), " gradients for ", next.size(),
                                " inputs");
        for (size_t i = 0; i < next.size(); ++i) {
            Node* child = next[i].get();
            if (!child) continue;
            std::vector<Tensor>& child_douts = pending_of(child); // the child counts this edge even without a gradient
            if (i < grads.size() && grads[i].defined()) {
                Tensor g = grads[i];
                if (g.shape() != node->input_shape(i))
                    fail<ShapeError>("backward", node->name(), " returned a gradient of shape ", g.shape(),
                                     " for input ", i, ", which has shape ", node->input_shape(i));
                if (g.dtype() != node->input_dtype(i)) g = g.to(node->input_dtype(i));
                accumulate(child_douts[node->next_output_nr(i)], g);
            }
            if (--dependencies[child] == 0) ready.push(child);
        }
    }
}

// ---- nodes ---------------------------------------------------------------------

static std::atomic<uint64_t> next_sequence_nr{0};
static std::atomic<int64_t> live_nodes{0};

Node::Node(const std::vector<Tensor>& inputs) : sequence_nr_(next_sequence_nr++) {
    next_.reserve(inputs.size());
    for (const Tensor& input : inputs) {
        next_.push_back(input.defined() ? gradient_edge(input) : nullptr);
        next_output_nr_.push_back(input.defined() && input.impl()->grad_fn ? input.impl()->output_nr : 0);
        input_shapes_.push_back(input.defined() ? input.shape() : Shape{});
        input_dtypes_.push_back(input.defined() ? input.dtype() : DType::Float32);
    }
    ++live_nodes;
}

Node::~Node() {
    // Dropping our edges may destroy the next node, whose destructor drops its
    // edges, and so on: a chain of nested destructors as deep as the graph,
    // which overflows the stack for long chains. Instead, the outermost
    // destructor collects the edges into a list and releases them one at a
    // time in a loop; nested destructors only append to that list.
    static thread_local std::vector<std::shared_ptr<Node>>* pending = nullptr;
    --live_nodes;
    if (pending) {
        for (auto& next : next_)
            if (next) pending->push_back(std::move(next));
        return;
    }
    std::vector<std::shared_ptr<Node>> local;
    pending = &local;
    for (auto& next : next_)
        if (next) local.push_back(std::move(next));
    while (!local.empty()) {
        std::shared_ptr<Node> node = std::move(local.back());
        local.pop_back();
        node.reset(); // may run ~Node, which appends to `local`
    }
    pending = nullptr;
}

int64_t Node::live_count() { return live_nodes.load(); }

FunctionNode::FunctionNode(std::string name, const std::vector<Tensor>& inputs, BackwardFn backward)
    : Node(inputs), name_(std::move(name)), backward_(std::move(backward)) {}

Grads FunctionNode::apply(const Tensor& dout) {
    if (released())
        fail<AutogradError>("backward", name_,
                            ": this part of the graph was already freed by an earlier backward(); "
                            "call backward(gradient, /*retain_graph=*/true) the first time to run it twice");
    return backward_(dout);
}

void FunctionNode::release() {
    Node::release();
    backward_ = nullptr; // destroys the closure and every tensor it saved
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : Node({}), leaf_(std::move(leaf)) {}

Grads AccumulateGrad::apply(const Tensor& dout) {
    // The first gradient becomes the leaf's .grad; later ones are added in
    // place. It is taken as it is when nothing else holds it or its memory,
    // it fills that memory in order and does not require grad (as PyTorch's
    // AccumulateGrad steals it): a Linear's weight gradient, fresh from its
    // product, is not copied.
    // Otherwise a contiguous copy: the op that produced it may have handed
    // the same tensor to several inputs, or it may be a view of another.
    if (!leaf_->grad) {
        const bool sole = dout.impl_ptr().use_count() == 1 && dout.storage().use_count() == 1 &&
                          !dout.requires_grad() && dout.is_contiguous() &&
                          dout.storage()->nbytes() == static_cast<size_t>(dout.numel()) * element_size(dout.dtype());
        leaf_->grad = sole ? dout.impl_ptr() : dout.clone().impl_ptr();
    } else {
        Tensor grad(leaf_->grad);
        grad.add_(dout);
    }
    return {};
}

// ---- saved tensors and grad mode -------------------------------------------------

SavedTensor::SavedTensor(const Tensor& tensor) {
    if (!tensor.defined()) return;
    data_ = tensor.detach();
    version_ = tensor.storage()->version();
}

const Tensor& SavedTensor::get() const {
    if (data_.defined() && data_.storage()->version() != version_)
        fail<AutogradError>("backward", "a tensor of shape ", data_.shape(),
                            " saved for backward was modified by an in-place operation since "
                            "(its version is ",
                            data_.storage()->version(), ", it was saved at version ", version_,
                            "); use the out-of-place form of that operation");
    return data_;
}

static thread_local bool grad_mode_enabled = true;
bool GradMode::is_enabled() { return grad_mode_enabled; }
void GradMode::set_enabled(bool enabled) { grad_mode_enabled = enabled; }

// ---- recording ------------------------------------------------------------------

bool needs_grad(const std::vector<Tensor>& inputs) {
    if (!GradMode::is_enabled()) return false;
    bool any = false;
    for (const Tensor& t : inputs) {
        check_view_history(t);
        any = any || (t.defined() && t.requires_grad());
    }
    return any;
}

std::shared_ptr<Node> gradient_edge(const Tensor& tensor) {
    TensorImpl* impl = tensor.impl();
    if (!impl->requires_grad) return nullptr;
    if (impl->grad_fn) return impl->grad_fn;
    // A leaf: share one AccumulateGrad among all graphs alive at once, so two
    // uses of the same parameter meet in one node.
    std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
    if (!acc) {
        acc = std::make_shared<AccumulateGrad>(tensor.impl_ptr());
        impl->grad_accumulator = acc;
    }
    return acc;
}

void attach(const Tensor& out, std::shared_ptr<Node> node) {
    TensorImpl* impl = out.impl();
    impl->grad_fn = std::move(node);
    impl->output_nr = 0;
    impl->requires_grad = true;
}

void attach_outputs(const std::vector<Tensor>& outs, const std::shared_ptr<Node>& node) {
    for (size_t i = 0; i < outs.size(); ++i) {
        TensorImpl* impl = outs[i].impl();
        impl->grad_fn = node;
        impl->output_nr = static_cast<uint32_t>(i);
        impl->requires_grad = true;
    }
}

void attach(const Tensor& out, std::string name, const std::vector<Tensor>& inputs, BackwardFn backward) {
    attach(out, std::make_shared<FunctionNode>(std::move(name), inputs, std::move(backward)));
}

// ---- Tensor's autograd methods -------------------------------------------------------

Tensor& Tensor::requires_grad_(bool on) {
    if (!is_leaf())
        fail<AutogradError>("requires_grad_", "only a leaf tensor can be marked; this one (shape ", shape(),
                            ") was computed by ", grad_fn()->name(), " (use detach() to make a leaf)");
    if (on && !is_floating_point())
        fail<DTypeError>("requires_grad_", "only floating point tensors can require grad, this one is ",
                         dtype_name(dtype()), " of shape ", shape());
    impl()->requires_grad = on;
    return *this;
}

Tensor Tensor::grad() const { return Tensor(checked().grad); }

void Tensor::set_grad(const Tensor& grad) const {
    if (grad.defined() && grad.shape() != shape())
        fail<ShapeError>("set_grad", "gradient has shape ", grad.shape(), " but the tensor has shape ", shape());
    if (grad.defined() && grad.dtype() != dtype())
        fail<DTypeError>("set_grad", "gradient is ", dtype_name(grad.dtype()), " but the tensor is ",
                         dtype_name(dtype()));
    impl()->grad = grad.defined() ? grad.impl_ptr() : nullptr;
}

void Tensor::zero_grad() const { impl()->grad = nullptr; }

void Tensor::retain_grad() const {
    if (!requires_grad()) fail<AutogradError>("retain_grad", "tensor of shape ", shape(), " does not require grad");
    if (is_leaf()) return; // leaves keep their gradient anyway
    auto& retained = grad_fn()->retained_outputs;
    for (const auto& kept : retained)
        if (kept.lock().get() == impl()) return; // asked before
    retained.push_back(impl_ptr());
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const { run_backward(*this, gradient, retain_graph); }

Tensor Tensor::detach() const {
    const TensorImpl& self = checked();
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = self.storage;
    impl->shape = self.shape;
    impl->strides = self.strides;
    impl->offset = self.offset;
    impl->dtype = self.dtype;
    return Tensor(std::move(impl));
}

} // namespace ember
