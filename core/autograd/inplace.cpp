// Autograd's rules for in-place ops and views (autograd.h declares them):
// which in-place writes it refuses, how an in-place op gives its target a
// new history, and how a view taken before such a write is caught before it
// carries a stale history into a graph. docs/autograd.md ("In-place
// operations and versions"). Tests: tests/test_autograd.cpp.
#include "core/autograd/autograd.h"

#include "core/ops/ops.h"

namespace ember {

// ---- views with a stale history ---------------------------------------------------

void fail_stale_view(const Tensor& view) {
    fail<AutogradError>("autograd", "a view of shape ", view.shape(),
                        " was taken before an in-place operation changed the history of the tensor it views, "
                        "so its own history is out of date; take the view again after the in-place operation");
}

// ---- in-place ops inside the graph ---------------------------------------------------

void check_inplace(const Tensor& self, const char* op, bool result_needs_grad) {
    if (!GradMode::is_enabled()) return;
    check_view_history(self);
    const TensorImpl* base = self.impl()->view_base.get();
    if ((self.is_leaf() && self.requires_grad()) || (base && !base->grad_fn && base->requires_grad))
        fail<AutogradError>(op, "a leaf tensor of shape ", self.shape(),
                            " that requires grad (or a view of one) cannot be modified in place (it would change "
                            "what its gradient means); do it inside a NoGradGuard, or use the out-of-place form");
    if (result_needs_grad && self.impl()->view_base)
        fail<AutogradError>(op, "in-place operation on a view of shape ", self.shape(),
                            " inside the graph: ember cannot rewrite the history of the tensor it views; "
                            "use the out-of-place form");
}

void attach_inplace(const Tensor& self, std::string name, const std::vector<Tensor>& inputs, BackwardFn backward) {
    // Build the node first: its edges read self's old history.
    auto node = std::make_shared<FunctionNode>(std::move(name), inputs, std::move(backward));
    TensorImpl* impl = self.impl();
    // A retain_grad() on self follows self to its new history.
    if (impl->grad_fn) {
        auto& retained = impl->grad_fn->retained_outputs;
        for (auto it = retained.begin(); it != retained.end(); ++it)
            if (it->lock().get() == impl) {
                node->retained_outputs.push_back(self.impl_ptr());
                retained.erase(it);
                break;
            }
    }
    impl->grad_fn = std::move(node);
    impl->output_nr = 0;
    impl->requires_grad = true;
    // Views of self taken before now still hold the old history: mark them stale.
    self.storage()->bump_history_version();
    impl->view_history_version = self.storage()->history_version();
}

void record_overwrite(const Tensor& self, const char* grad_name) {
    if (!GradMode::is_enabled() || !self.requires_grad() || self.is_leaf()) return;
    // forward: self = values independent of its past, so dself_old = 0.
    attach_inplace(self, grad_name, {self}, [](const Tensor& dout) -> Grads { return {zeros_like(dout)}; });
}

} // namespace ember
