// Custom differentiable ops from user code, like torch.autograd.Function:
// derive from Function<YourOp>, write static forward and backward, call
// YourOp::apply (an example stands above struct Function below). Prove a new
// op right with gradcheck (gradcheck.h). docs/extending.md walks through a
// full example; tests/test_custom_function.cpp is one, written against the
// installed headers only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/autograd/autograd.h"

namespace ember {

// What forward leaves for backward: tensors (version-checked, as built-in
// ops' are) and plain numbers.
class AutogradContext {
public:
    void save_for_backward(const std::vector<Tensor>& tensors) {
        saved_.clear();
        for (const Tensor& t : tensors) saved_.emplace_back(t);
    }
    // The saved tensors, in order. Throws AutogradError if an in-place op
    // changed one since forward, or if backward already freed them. A
    // reference to the context's own list, so that the idiom
    // `const Tensor& x = ctx->get_saved_variables()[0];` holds (PyTorch's
    // C++ returns a copy, and there the same line dangles).
    const std::vector<Tensor>& get_saved_variables() const {
        if (released_)
            fail<AutogradError>("backward", "saved tensors were already freed by an earlier backward(); "
                                            "pass retain_graph=true to run backward twice");
        unpacked_.clear();
        for (const SavedTensor& s : saved_) unpacked_.push_back(s.get());
        return unpacked_;
    }
    // True when forward argument i (counting all arguments) needs a gradient.
    bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }

    // Numbers forward wants backward to see: ctx->saved_data["dim"] = 1.
    std::map<std::string, double> saved_data;

    // Library side: set by Function::apply, cleared after backward.
    void set_needs_input_grad(std::vector<bool> needs) { needs_input_grad_ = std::move(needs); }
    void release() {
        saved_.clear();
        unpacked_.clear();
        released_ = true;
    }
    void forget_unpacked() { unpacked_.clear(); }

private:
    std::vector<SavedTensor> saved_;
    mutable std::vector<Tensor> unpacked_; // what get_saved_variables() last returned
    std::vector<bool> needs_input_grad_;
    bool released_ = false;
};

namespace internal {

// The node a custom function records: it calls Derived::backward and maps the
// gradients of the tensor arguments to the node's inputs.
template <typename Derived>
class CustomFunctionNode : public Node {
public:
    CustomFunctionNode(const std::vector<Tensor>& inputs, std::vector<size_t> tensor_positions, size_t num_args,
                       std::shared_ptr<AutogradContext> ctx)
        : Node(inputs), positions_(std::move(tensor_positions)), num_args_(num_args), ctx_(std::move(ctx)) {}

    std::string name() const override {
        if constexpr (requires { Derived::name(); }) return Derived::name();
        else return "CustomFunctionBackward";
    }

    Grads apply(const Tensor& dout) override {
        std::vector<Tensor> grads = Derived::backward(ctx_.get(), dout);
        // The unpacked tensors may hold this node (a saved output's grad_fn):
        // kept past backward they would be a cycle, even with retain_graph.
        ctx_->forget_unpacked();
        if (grads.size() != num_args_)
            fail<AutogradError>("backward", name(), "::backward returned ", grads.size(),
                                " gradients, but forward took ", num_args_,
                                " arguments (return an undefined Tensor() for those without one)");
        Grads out;
        for (size_t p : positions_) out.push_back(grads[p]);
        return out;
    }

    void release() override {
        Node::release();
        ctx_->release();
    }

private:
    std::vector<size_t> positions_; // which forward arguments were tensors
    size_t num_args_;
    std::shared_ptr<AutogradContext> ctx_;
};

template <typename T>
void collect_tensor(const T& arg, size_t position, std::vector<Tensor>& tensors, std::vector<size_t>& positions) {
    if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) {
        tensors.push_back(arg);
        positions.push_back(position);
    }
}

} // namespace internal

// Derive from Function<YourOp> and write two static functions:
//
//   struct Cube : ember::Function<Cube> {
//       static Tensor forward(AutogradContext* ctx, const Tensor& x) {
//           ctx->save_for_backward({x});
//           return x * x * x;                      // y = x^3
//       }
//       static std::vector<Tensor> backward(AutogradContext* ctx, const Tensor& dout) {
//           Tensor x = ctx->get_saved_variables()[0];
//           return {dout * 3 * x * x};             // dx = dout * 3x^2
//       }
//   };
//   Tensor y = Cube::apply(x);
//
// forward runs with grad recording off and may take any arguments; backward
// returns one gradient per forward argument (an undefined Tensor for
// arguments that are not tensors or need none) and runs with recording off.
template <typename Derived>
struct Function {
    template <typename... Args>
    static Tensor apply(Args&&... args) {
        // Which arguments are tensors: they become the node's inputs.
        std::vector<Tensor> inputs;
        std::vector<size_t> positions;
        size_t position = 0;
        (internal::collect_tensor(args, position++, inputs, positions), ...);

        auto ctx = std::make_shared<AutogradContext>();
        std::vector<bool> needs(sizeof...(Args), false);
        for (size_t i = 0; i < inputs.size(); ++i) needs[positions[i]] = needs_grad(inputs[i]);
        ctx->set_needs_input_grad(needs);

        Tensor out;
        {
            NoGradGuard no_grad;
            out = Derived::forward(ctx.get(), std::forward<Args>(args)...);
        }
        if (!out.defined()) fail<AutogradError>("Function::apply", "forward returned an undefined tensor");
        // A fresh handle, so that attaching history never touches a tensor
        // the caller passed in (forward may return an input as it is).
        out = out.detach();
        if (needs_grad(inputs))
            attach(out,
                   std::make_shared<internal::CustomFunctionNode<Derived>>(inputs, positions, sizeof...(Args), ctx));
        return out;
    }
};

} // namespace ember
