// checkpoint: see checkpoint.h. Tests: tests/test_activation_checkpoint.cpp.
#include "core/autograd/checkpoint.h"

#include "core/autograd/autograd.h"
#include "core/random/generator.h"

namespace ember {

namespace {

// The default generator at a saved state for a scope, then back where it was.
class GeneratorStateGuard {
public:
    explicit GeneratorStateGuard(const std::vector<uint8_t>& state) : now_(default_generator().get_state()) {
        default_generator().set_state(state);
    }
    ~GeneratorStateGuard() { default_generator().set_state(now_); }
    GeneratorStateGuard(const GeneratorStateGuard&) = delete;
    GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;

private:
    std::vector<uint8_t> now_;
};

} // namespace

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const std::vector<Tensor>& parameters) {
    std::vector<Tensor> inputs{input};
    inputs.insert(inputs.end(), parameters.begin(), parameters.end());
    if (!needs_grad(inputs)) return fn(input); // nothing to differentiate: a plain call
    std::vector<uint8_t> rng = default_generator().get_state();
    Tensor out;
    {
        NoGradGuard no_grad; // fn's intermediates are freed as soon as fn returns
        out = fn(input);
    }
    // backward: run fn again from a leaf copy of the input, at the same
    // generator state, recording; backpropagate dout through it. The
    // parameters' gradients are added where they live, by that inner
    // backward; input's comes back through this node.
    attach(out, "CheckpointFunctionBackward", inputs,
           [fn, rng, in = SavedTensor(input), input_grad = input.requires_grad(),
            count = inputs.size()](const Tensor& dout) -> Grads {
               Tensor x = in.get().detach();
               if (input_grad) x.requires_grad_(true);
               {
                   AutoGradMode grad(true); // backward passes run with recording off
                   GeneratorStateGuard same_draws(rng);
                   Tensor again = fn(x);
                   if (again.requires_grad()) again.backward(dout);
               }
               Grads grads(count); // undefined for the parameters: already added to their .grad
               if (input_grad) grads[0] = x.grad();
               return grads;
           });
    return out;
}

} // namespace ember
