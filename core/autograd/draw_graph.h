// draw_graph: a picture of the autograd graph behind a tensor, as micrograd's
// draw_dot and torchviz's make_dot draw it. One box per node that backward()
// would run: the op's backward function (MulBackward0, ...) with its output
// shape, or a leaf's AccumulateGrad in its own colour; an arrow from each
// input to the op that used it. Written as Graphviz DOT text, or as an SVG
// that ember lays out itself (no Graphviz needed). docs/autograd.md shows one
// and says how to read it; tests/test_draw_graph.cpp checks it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace ember {

enum class GraphFormat { Dot, Svg };

// Names for tensors of the graph: a module's named_parameters() (dotted names
// such as "0.weight"), or your own list such as {{"a", a}, {"c", c}}.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The graph behind `root` as DOT or SVG text. A box shows, for a tensor of at
// most 6 elements, its values ("data") and, once it has one, its gradient
// ("grad"), whenever the picture can reach the tensor: the root, every leaf
// (its AccumulateGrad holds it), every tensor named in `names`, and every
// tensor you called retain_grad() on while you still hold it. The graph does
// not keep the tensors ops computed (that is how it is freed), so an unnamed
// intermediate shows only its op and shape.
// Throws AutogradError if root has no graph (it does not require grad).
std::string draw_graph(const Tensor& root, GraphFormat format = GraphFormat::Dot, const NamedTensors& names = {});

// Writes the graph to `path`: DOT for a name ending in ".dot" or ".gv", SVG
// for ".svg". The file is replaced whole or not at all. Throws ValueError
// naming the path for another ending or a file that cannot be written.
void draw_graph(const Tensor& root, const std::string& path, const NamedTensors& names = {});

} // namespace ember
