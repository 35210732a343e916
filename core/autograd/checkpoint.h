// checkpoint: trade compute for memory, as torch.utils.checkpoint does. The
// forward runs fn without recording a graph, so nothing inside it is saved
// for the backward; the backward runs fn again, recording this time, and
// backpropagates through that. docs/checkpointing.md; tests:
// tests/test_activation_checkpoint.cpp.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember {

// out = fn(input), with fn's intermediate tensors recomputed in the backward
// instead of kept. `parameters` are the tensors fn uses that need gradients
// besides input (a module's parameters()): the recomputation adds into their
// .grad, and they make the call record a node even when input needs no
// gradient. The default generator's state is saved before the forward and
// restored for the recomputation, so dropout inside fn draws the same masks
// both times: the gradients are the bits of the same computation without
// checkpoint. fn must be deterministic otherwise, and use only input and
// `parameters` (plus tensors that need no gradient).
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const std::vector<Tensor>& parameters = {});

} // namespace ember
