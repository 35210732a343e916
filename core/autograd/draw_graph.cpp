// draw_graph (draw_graph.h): the autograd graph behind a tensor as DOT or SVG.
//
// Three steps, each a function below: collect the graph (walk the edges from
// the root, as backward() does, giving every node a box and the text it
// shows); write it as DOT (Graphviz lays it out); or lay it out here and
// write SVG. The layout is the layered one Graphviz's `dot` uses, in its
// simplest form: a node's column is its longest distance from the root, long
// edges pass through invisible waypoints, and a few sweeps order each column
// by the mean position of its neighbours so that edges cross less.
// Tests: tests/test_draw_graph.cpp. docs/autograd.md shows a picture.
#include "core/autograd/draw_graph.h"

#include <algorithm>
#include <memory>
#include <queue>
#include <unordered_map>

#include "core/autograd/autograd.h"
#include "core/tensor/svg_text.h"

namespace ember {

namespace {

using internal::fixed;
using internal::num;
using internal::xml_text;

// A tensor with at most this many elements shows its values in its box.
constexpr int64_t kMaxShownElements = 6;

// ---- 1. collect the graph ------------------------------------------------------

enum class Kind { Op, Leaf, Root };

struct Box {
    Kind kind = Kind::Op;
    std::string name;               // a name from `names`, or ""
    std::vector<std::string> lines; // the text, top to bottom
    int depth = 0;                  // longest path from the root (root: 0)
};

struct Edge {
    int from, to; // box indices: the input, and the op that used it
    int input;    // which input of `to` this is (0 = first)
};

struct Graph {
    std::vector<Box> boxes; // boxes[0] is the root
    std::vector<Edge> edges;
};

// "24.7041" for a 0-d tensor, "[-4.0000]", "[[1.0000, 2.0000], [3.0000, 4.0000]]":
// four decimals, as micrograd's draw_dot prints data and grad.
std::string values_text(const Tensor& t) {
    const Tensor flat = t.detach().to(kFloat64).contiguous();
    const double* v = flat.data_ptr<double>();
    const Shape& shape = flat.shape();
    int64_t next = 0;
    // Writes dimension `dim` and everything inside it, reading values in order.
    auto write = [&](auto&& self, size_t dim) -> std::string {
        if (dim == shape.size()) return fixed(v[next++], 4);
        std::string s = "[";
        for (int64_t i = 0; i < shape[dim]; ++i) s += (i > 0 ? ", " : "") + self(self, dim + 1);
        return s + "]";
    };
    return write(write, 0);
}

// What one box says: its name (if it has one), the node and the shape, then
// the values and gradient of its tensor when it is small and still reachable.
std::vector<std::string> box_lines(const std::string& name, const Node& node, const Shape& shape,
                                   const Tensor& tensor) {
    std::vector<std::string> lines;
    if (!name.empty()) lines.push_back(name);
    lines.push_back(node.name() + " " + shape_str(shape));
    if (tensor.defined() && tensor.numel() <= kMaxShownElements) {
        lines.push_back("data " + values_text(tensor));
        if (tensor.grad().defined()) lines.push_back("grad " + values_text(tensor.grad()));
    }
    return lines;
}

Graph collect(const Tensor& root, const NamedTensors& names) {
    if (!root.defined()) fail<ValueError>("draw_graph", "the tensor is undefined: there is no graph to draw");
    if (!root.requires_grad())
        fail<AutogradError>("draw_graph", "tensor of shape ", root.shape(),
                            " does not require grad and has no grad_fn: there is no graph to draw "
                            "(did you forget requires_grad_() on a parameter, or run under NoGradGuard?)");
    const std::shared_ptr<Node> root_node = gradient_edge(root); // a leaf root gets its AccumulateGrad
    // The node of each named tensor: its grad_fn, or a leaf's AccumulateGrad.
    // The first name given for a node wins.
    std::unordered_map<const Node*, std::pair<std::string, Tensor>> named;
    for (const auto& [name, t] : names) {
        if (!t.defined() || !t.requires_grad()) continue;
        std::shared_ptr<Node> node = t.is_leaf() ? t.impl()->grad_accumulator.lock() : t.grad_fn();
        if (node) named.try_emplace(node.get(), name, t);
    }

    // Breadth-first from the root, following next_functions in input order:
    // a box per node reached, numbered in the order the walk meets them.
    std::vector<const Node*> nodes{root_node.get()};
    std::vector<Shape> shapes{root.shape()};
    std::unordered_map<const Node*, int> index{{root_node.get(), 0}};
    Graph g;
    for (size_t i = 0; i < nodes.size(); ++i) {
        const auto& next = nodes[i]->next_functions();
        for (size_t k = 0; k < next.size(); ++k) {
            if (!next[k]) continue; // that input needs no gradient: no edge
            auto [it, is_new] = index.try_emplace(next[k].get(), static_cast<int>(nodes.size()));
            if (is_new) {
                nodes.push_back(next[k].get());
                shapes.push_back(nodes[i]->input_shape(k)); // the input's shape is the next node's output shape
            }
            g.edges.push_back({it->second, static_cast<int>(i), static_cast<int>(k)});
        }
    }

    // The text of each box, with the tensor it stands for when one is reachable.
    for (size_t i = 0; i < nodes.size(); ++i) {
        const Node* node = nodes[i];
        const auto* leaf = dynamic_cast<const AccumulateGrad*>(node);
        Box box;
        box.kind = i == 0 ? Kind::Root : leaf ? Kind::Leaf : Kind::Op;
        Tensor tensor;
        if (auto it = named.find(node); it != named.end()) {
            box.name = it->second.first;
            tensor = it->second.second;
        } else if (i == 0) {
            tensor = root;
        } else if (leaf) {
            tensor = leaf->variable();
        } else if (!node->retained_outputs.empty()) {
            if (auto kept = node->retained_outputs.front().lock()) tensor = Tensor(kept);
        }
        box.lines = box_lines(box.name, *node, shapes[i], tensor);
        g.boxes.push_back(std::move(box));
    }

    // Depth = the longest path from the root, so every arrow points from a
    // deeper column to a shallower one. Nodes are visited in a topological
    // order (a node once every op that uses it is done), as the engine does.
    std::vector<int> pending(nodes.size(), 0);
    for (const Edge& e : g.edges) ++pending[e.from];
    std::vector<std::vector<const Edge*>> inputs_of(nodes.size());
    for (const Edge& e : g.edges) inputs_of[e.to].push_back(&e);
    std::queue<int> ready;
    ready.push(0);
    while (!ready.empty()) {
        const int b = ready.front();
        ready.pop();
        for (const Edge* e : inputs_of[b]) {
            g.boxes[e->from].depth = std::max(g.boxes[e->from].depth, g.boxes[b].depth + 1);
            if (--pending[e->from] == 0) ready.push(e->from);
        }
    }
    return g;
}

// ---- 2. DOT --------------------------------------------------------------------

// Colours, as torchviz uses them: the tensor drawn green, leaves blue, ops grey.
const char* fill_colour(Kind kind) {
    switch (kind) {
    case Kind::Root: return "#d9f2d0";
    case Kind::Leaf: return "#cfe2f3";
    default: return "#eeeeee";
    }
}

// A DOT string literal: quotes and backslashes escaped.
std::string dot_quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string to_dot(const Graph& g) {
    std::string out = "digraph autograd {\n"
                      "    rankdir=LR;\n"
                      "    node [shape=box, style=\"rounded,filled\", fontname=\"DejaVu Sans\", fontsize=11];\n";
    for (size_t i = 0; i < g.boxes.size(); ++i) {
        std::string label;
        for (const std::string& line : g.boxes[i].lines) label += (label.empty() ? "" : "\n") + line;
        std::string quoted = dot_quote(label);
        // Line breaks inside a DOT label are written \n.
        for (size_t at = quoted.find('\n'); at != std::string::npos; at = quoted.find('\n', at + 2))
            quoted.replace(at, 1, "\\n");
        out += "    n" + std::to_string(i) + " [label=" + quoted + ", fillcolor=\"" + fill_colour(g.boxes[i].kind) +
               "\"];\n";
    }
    for (const Edge& e : g.edges) out += "    n" + std::to_string(e.from) + " -> n" + std::to_string(e.to) + ";\n";
    return out + "}\n";
}

// ---- 3. SVG: layout, then drawing -----------------------------------------------

constexpr double kFont = 12, kLine = 16, kPad = 8; // px: text size, line height, padding in a box
constexpr double kColumnGap = 40, kRowGap = 14, kMargin = 20;
constexpr double kWaypoint = 6; // the height a long edge takes where it passes a column
// Under the picture. SVG collapses runs of spaces, so the parts are joined with " · ".
constexpr const char* kLegend = "green: the tensor drawn \u00b7 blue: a leaf (AccumulateGrad) \u00b7 grey: an op's "
                                "backward \u00b7 arrows: from an input to the op that used it";

// Column c of the picture holds slots: a box, or a waypoint of a long edge.
struct Slot {
    int box = -1;                   // the box, or -1 for a waypoint
    std::vector<int> left;          // slots in column c-1 joined to this one
    std::vector<int> right;         // slots in column c+1 joined to this one
    double order = 0, y = 0, h = 0; // position in its column, then its top and height in px
};

std::string to_svg(const Graph& g) {
    const int n = static_cast<int>(g.boxes.size());
    int max_depth = 0;
    for (const Box& b : g.boxes) max_depth = std::max(max_depth, b.depth);
    const int columns = max_depth + 1;
    auto column_of = [&](int box) { return max_depth - g.boxes[box].depth; }; // leaves left, root right

    // Slots: one per box, then a waypoint in every column a long edge passes.
    std::vector<Slot> slots(n);
    std::vector<std::vector<int>> column(columns);
    for (int b = 0; b < n; ++b) {
        slots[b].box = b;
        column[column_of(b)].push_back(b);
    }
    std::vector<std::vector<int>> path(g.edges.size()); // each edge's slots, left to right
    for (size_t e = 0; e < g.edges.size(); ++e) {
        int prev = g.edges[e].from;
        path[e].push_back(prev);
        for (int c = column_of(g.edges[e].from) + 1; c <= column_of(g.edges[e].to); ++c) {
            int next = g.edges[e].to;
            if (c < column_of(g.edges[e].to)) {
                next = static_cast<int>(slots.size());
                slots.emplace_back();
                column[c].push_back(next);
            }
            slots[prev].right.push_back(next);
            slots[next].left.push_back(prev);
            path[e].push_back(next);
            prev = next;
        }
    }

    // Order each column by the mean position of its neighbours (the
    // barycenter heuristic): sweep right to left from the root, then left to
    // right, a few times. Slots without neighbours on that side keep their place.
    auto renumber = [&](const std::vector<int>& col) {
        for (size_t i = 0; i < col.size(); ++i) slots[col[i]].order = static_cast<double>(i);
    };
    for (auto& col : column) renumber(col);
    auto sort_by = [&](std::vector<int>& col, bool by_right) {
        std::vector<double> key(slots.size());
        for (int s : col) {
            const auto& nb = by_right ? slots[s].right : slots[s].left;
            double sum = 0;
            for (int t : nb) sum += slots[t].order;
            key[s] = nb.empty() ? slots[s].order : sum / static_cast<double>(nb.size());
        }
        std::stable_sort(col.begin(), col.end(), [&](int a, int b) { return key[a] < key[b]; });
        renumber(col);
    };
    for (int sweep = 0; sweep < 4; ++sweep) {
        for (int c = columns - 2; c >= 0; --c) sort_by(column[c], true);
        for (int c = 1; c < columns; ++c) sort_by(column[c], false);
    }

    // Sizes: each box fits its longest line; a column is as wide as its widest box.
    std::vector<double> width(n), col_x(columns, kMargin), col_w(columns, 0);
    for (int b = 0; b < n; ++b) {
        double w = 0;
        for (const std::string& line : g.boxes[b].lines) w = std::max(w, internal::text_width(line, kFont));
        width[b] = w + 2 * kPad;
        slots[b].h = kLine * static_cast<double>(g.boxes[b].lines.size()) + kPad;
        col_w[column_of(b)] = std::max(col_w[column_of(b)], width[b]);
    }
    for (size_t s = n; s < slots.size(); ++s) slots[s].h = kWaypoint;
    for (int c = 1; c < columns; ++c) col_x[c] = col_x[c - 1] + col_w[c - 1] + kColumnGap;
    // Stack each column top to bottom, centred on the tallest column.
    std::vector<double> col_h(columns, 0);
    for (int c = 0; c < columns; ++c)
        for (int s : column[c]) col_h[c] += slots[s].h + (col_h[c] > 0 ? kRowGap : 0);
    const double height = *std::max_element(col_h.begin(), col_h.end());
    for (int c = 0; c < columns; ++c) {
        double y = kMargin + (height - col_h[c]) / 2;
        for (int s : column[c]) {
            slots[s].y = y;
            y += slots[s].h + kRowGap;
        }
    }
    auto box_x = [&](int b) { return col_x[column_of(b)] + (col_w[column_of(b)] - width[b]) / 2; };

    const double legend_y = kMargin + height + 24;
    const double W = col_x[columns - 1] + col_w[columns - 1] + kMargin;
    const double H = legend_y + 12;
    std::string out = internal::svg_open(std::max(W, internal::text_width(kLegend, 11) + 2 * kMargin), H);
    out += "<defs><marker id=\"arrow\" viewBox=\"0 0 8 8\" refX=\"8\" refY=\"4\" markerWidth=\"8\" "
           "markerHeight=\"8\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#555555\"/></marker></defs>\n";

    // Edges first, so boxes sit on top. An edge leaves its input's box on the
    // right, runs through its waypoints, and enters the op's box on the left at
    // a height given by the input's position: first input highest, so `c + c`
    // shows two arrows.
    out += "<g class=\"edges\" fill=\"none\" stroke=\"#555555\" stroke-width=\"1.2\">\n";
    std::vector<int> n_inputs(n, 0);
    for (const Edge& e : g.edges) n_inputs[e.to] = std::max(n_inputs[e.to], e.input + 1);
    for (size_t e = 0; e < g.edges.size(); ++e) {
        const Edge& edge = g.edges[e];
        std::vector<std::pair<double, double>> pts;
        pts.emplace_back(box_x(edge.from) + width[edge.from], slots[edge.from].y + slots[edge.from].h / 2);
        for (size_t k = 1; k + 1 < path[e].size(); ++k) { // waypoints: across their column, level
            const Slot& s = slots[path[e][k]];
            const int c = column_of(edge.from) + static_cast<int>(k);
            pts.emplace_back(col_x[c], s.y + s.h / 2);
            pts.emplace_back(col_x[c] + col_w[c], s.y + s.h / 2);
        }
        const Slot& to = slots[edge.to];
        pts.emplace_back(box_x(edge.to), to.y + to.h * (edge.input + 1) / (n_inputs[edge.to] + 1));
        // Smooth S-curves between points: control points halfway across.
        std::string d = "M" + num(pts[0].first) + "," + num(pts[0].second);
        for (size_t k = 1; k < pts.size(); ++k) {
            const double mx = (pts[k - 1].first + pts[k].first) / 2;
            d += " C" + num(mx) + "," + num(pts[k - 1].second) + " " + num(mx) + "," + num(pts[k].second) + " " +
                 num(pts[k].first) + "," + num(pts[k].second);
        }
        out += "<path class=\"edge\" d=\"" + d + "\" marker-end=\"url(#arrow)\"/>\n";
    }
    out += "</g>\n";

    // Boxes: a rounded rectangle and one <text> per line; a name is bold.
    static const char* kind_class[] = {"op", "leaf", "root"};
    for (int b = 0; b < n; ++b) {
        const Box& box = g.boxes[b];
        const double x = box_x(b), y = slots[b].y;
        out += "<g class=\"node " + std::string(kind_class[static_cast<int>(box.kind)]) + "\" id=\"n" +
               std::to_string(b) + "\">\n";
        out += "<rect class=\"node\" x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(width[b]) +
               "\" height=\"" + num(slots[b].h) + "\" rx=\"6\" fill=\"" + fill_colour(box.kind) +
               "\" stroke=\"#555555\"/>\n";
        for (size_t k = 0; k < box.lines.size(); ++k) {
            const bool bold = k == 0 && !box.name.empty();
            internal::svg_text(out, x + kPad, y + kPad / 2 + kLine * static_cast<double>(k + 1) - 4, box.lines[k],
                               "font-size=\"" + num(kFont) + "\"" + (bold ? " font-weight=\"bold\"" : ""));
        }
        out += "</g>\n";
    }
    internal::svg_text(out, kMargin, legend_y, kLegend, "class=\"legend\" font-size=\"11\" fill=\"#555555\"");
    return out + "</svg>\n";
}

} // namespace

std::string draw_graph(const Tensor& root, GraphFormat format, const NamedTensors& names) {
    const Graph g = collect(root, names);
    return format == GraphFormat::Dot ? to_dot(g) : to_svg(g);
}

void draw_graph(const Tensor& root, const std::string& path, const NamedTensors& names) {
    auto ends_with = [&](const std::string& ext) {
        return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
    };
    GraphFormat format;
    if (ends_with(".dot") || ends_with(".gv")) format = GraphFormat::Dot;
    else if (ends_with(".svg")) format = GraphFormat::Svg;
    else fail<ValueError>("draw_graph", "cannot tell the format of '", path, "': name it .dot, .gv or .svg");
    const std::string text = draw_graph(root, format, names);
    const std::string why = internal::write_file_whole(path, text);
    if (!why.empty()) fail<ValueError>("draw_graph", "cannot write '", path, "': ", why);
}

} // namespace ember
