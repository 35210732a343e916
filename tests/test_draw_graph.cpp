// draw_graph (core/autograd/draw_graph.cpp): the DOT of a known expression,
// line by line; leaf and parameter names; values and gradients after
// backward; the SVG's structure (well-formed, one box per node, left to
// right); and the errors. The expected DOT is written from the math and from
// PyTorch's grad_fn names for the same expression:
//   L = (a*b + c) * f   ->  L.grad_fn            MulBackward0
//                           .next_functions      AddBackward0, AccumulateGrad (f)
//                           AddBackward0's next  MulBackward0, AccumulateGrad (c)
//                           MulBackward0's next  AccumulateGrad (a), AccumulateGrad (b)
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ember.h>

#include "xml.h"

using namespace ember;
using namespace ember::testing;

namespace {

// micrograd's lecture example: a = 2, b = -3, c = 10, f = -2, so
// d = a*b + c = 4 and L = d*f = -8; dL/da = f*b = 6, dL/db = f*a = -4,
// dL/dc = f = -2, dL/df = d = 4, dL/dd = f = -2.
struct Lecture {
    Tensor a = tensor({2.0}).requires_grad_();
    Tensor b = tensor({-3.0}).requires_grad_();
    Tensor c = tensor({10.0}).requires_grad_();
    Tensor f = tensor({-2.0}).requires_grad_();
    Tensor d = a * b + c;
    Tensor L = d * f;
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
    return n;
}

const char* kHeader = "digraph autograd {\n"
                      "    rankdir=LR;\n"
                      "    node [shape=box, style=\"rounded,filled\", fontname=\"DejaVu Sans\", fontsize=11];\n";

} // namespace

TEST_CASE("the DOT of (a*b + c) * f: nodes breadth-first from the root, edges input -> op", "[draw_graph]") {
    Lecture x;
    // Boxes are numbered as a breadth-first walk from L meets them, following
    // next_functions in input order. Only the root and the leaves are held by
    // the picture, so only they show data; the temporary a*b + c shows its op.
    const std::string expected = std::string(kHeader) +
                                 "    n0 [label=\"MulBackward0 (1)\\ndata [-8.0000]\", fillcolor=\"#d9f2d0\"];\n"
                                 "    n1 [label=\"AddBackward0 (1)\", fillcolor=\"#eeeeee\"];\n"
                                 "    n2 [label=\"AccumulateGrad (1)\\ndata [-2.0000]\", fillcolor=\"#cfe2f3\"];\n"
                                 "    n3 [label=\"MulBackward0 (1)\", fillcolor=\"#eeeeee\"];\n"
                                 "    n4 [label=\"AccumulateGrad (1)\\ndata [10.0000]\", fillcolor=\"#cfe2f3\"];\n"
                                 "    n5 [label=\"AccumulateGrad (1)\\ndata [2.0000]\", fillcolor=\"#cfe2f3\"];\n"
                                 "    n6 [label=\"AccumulateGrad (1)\\ndata [-3.0000]\", fillcolor=\"#cfe2f3\"];\n"
                                 "    n1 -> n0;\n" // d   -> d*f
                                 "    n2 -> n0;\n" // f   -> d*f
                                 "    n3 -> n1;\n" // a*b -> a*b + c
                                 "    n4 -> n1;\n" // c   -> a*b + c
                                 "    n5 -> n3;\n" // a   -> a*b
                                 "    n6 -> n3;\n" // b   -> a*b
                                 "}\n";
    CHECK(draw_graph(x.L) == expected);
    CHECK(draw_graph(x.L, GraphFormat::Dot) == expected);
}

TEST_CASE("names label leaves and intermediates; gradients appear after backward", "[draw_graph]") {
    Lecture x;
    x.d.retain_grad();
    const NamedTensors names{{"a", x.a}, {"b", x.b}, {"c", x.c}, {"d", x.d}, {"f", x.f}, {"L", x.L}};
    x.L.backward();
    // L is not a leaf and was not retained: it has no grad. d was retained.
    const std::string expected = std::string(kHeader) +
                                 "    n0 [label=\"L\\nMulBackward0 (1)\\ndata [-8.0000]\", fillcolor=\"#d9f2d0\"];\n"
                                 "    n1 [label=\"d\\nAddBackward0 (1)\\ndata [4.0000]\\ngrad [-2.0000]\", "
                                 "fillcolor=\"#eeeeee\"];\n"
                                 "    n2 [label=\"f\\nAccumulateGrad (1)\\ndata [-2.0000]\\ngrad [4.0000]\", "
                                 "fillcolor=\"#cfe2f3\"];\n"
                                 "    n3 [label=\"MulBackward0 (1)\", fillcolor=\"#eeeeee\"];\n"
                                 "    n4 [label=\"c\\nAccumulateGrad (1)\\ndata [10.0000]\\ngrad [-2.0000]\", "
                                 "fillcolor=\"#cfe2f3\"];\n"
                                 "    n5 [label=\"a\\nAccumulateGrad (1)\\ndata [2.0000]\\ngrad [6.0000]\", "
                                 "fillcolor=\"#cfe2f3\"];\n"
                                 "    n6 [label=\"b\\nAccumulateGrad (1)\\ndata [-3.0000]\\ngrad [-4.0000]\", "
                                 "fillcolor=\"#cfe2f3\"];\n"
                                 "    n1 -> n0;\n"
                                 "    n2 -> n0;\n"
                                 "    n3 -> n1;\n"
                                 "    n4 -> n1;\n"
                                 "    n5 -> n3;\n"
                                 "    n6 -> n3;\n"
                                 "}\n";
    CHECK(draw_graph(x.L, GraphFormat::Dot, names) == expected);
}

TEST_CASE("a tensor used twice gives two edges; shapes and small values are shown nested", "[draw_graph]") {
    Tensor w = tensor({{1.0, 2.0}, {3.0, 4.0}}).requires_grad_(); // (2,2): 4 values, shown
    Tensor big = ones({7}).requires_grad_();                      // 7 values: too many to show
    Tensor y = sum(w + w) + sum(big);
    const std::string dot = draw_graph(y);
    // y = AddBackward0(SumBackward0(AddBackward0(w, w)), SumBackward0(big)).
    CHECK(dot.find("n0 [label=\"AddBackward0 ()\\ndata 27.0000\"") != std::string::npos); // 2*(1+2+3+4) + 7
    CHECK(dot.find("[label=\"AccumulateGrad (2,2)\\ndata [[1.0000, 2.0000], [3.0000, 4.0000]]\"") != std::string::npos);
    CHECK(dot.find("[label=\"AccumulateGrad (7)\", fillcolor=\"#cfe2f3\"]") != std::string::npos);
    // w + w: both inputs come from w's one AccumulateGrad, so two edges join the same pair.
    CHECK(count(dot, "n5 -> n3;\n") == 2);
    CHECK(dot.find("n5 [label=\"AccumulateGrad (2,2)") != std::string::npos);
}

TEST_CASE("a module's named_parameters label its leaves with dotted names", "[draw_graph]") {
    manual_seed(0);
    nn::Sequential net(
        {std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 1)});
    Tensor loss = sum(net.forward(ones({4, 2})));
    const std::string dot = draw_graph(loss, GraphFormat::Dot, net.named_parameters());
    // Each parameter is a leaf box whose first line is its name; the input
    // (no grad) has no box at all.
    for (const char* name : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
        INFO(name);
        CHECK(count(dot, std::string("label=\"") + name + "\\nAccumulateGrad") == 1);
    }
    CHECK(count(dot, "AccumulateGrad") == 4);
    CHECK(count(dot, "fillcolor=\"#cfe2f3\"") == 4);
    // 0.weight is (3,2): 6 values, shown; 2.weight (1,3) too; values only, no grad before backward.
    CHECK(count(dot, "\\ngrad ") == 0);
    loss.backward();
    const std::string after = draw_graph(loss, GraphFormat::Dot, net.named_parameters());
    CHECK(count(after, "\\ngrad ") == 4); // every parameter now has a gradient
    // 2.bias receives d(sum over 4 rows)/d(bias) = 4.
    const size_t label = after.find("label=\"2.bias\\nAccumulateGrad (1)\\ndata [");
    REQUIRE(label != std::string::npos);
    const std::string text = after.substr(label, after.find("\",", label) - label + 1);
    const std::string grad = "\\ngrad [4.0000]\"";
    REQUIRE(text.size() > grad.size());
    CHECK(text.substr(text.size() - grad.size()) == grad);
}

TEST_CASE("the SVG is well-formed: one box per node, its text, edges pointing right", "[draw_graph][svg]") {
    Lecture x;
    x.L.backward();
    const NamedTensors names{{"a", x.a}, {"b", x.b}, {"c", x.c}, {"f", x.f}};
    const std::string svg = draw_graph(x.L, GraphFormat::Svg, names);
    REQUIRE(xml_problem(svg).empty());
    // 7 nodes (2 ops + 1 op root + 4 leaves): 7 boxes, 6 edges.
    const auto rects = tags(svg, "rect");
    const auto boxes =
        std::count_if(rects.begin(), rects.end(), [](const std::string& t) { return attr(t, "class") == "node"; });
    CHECK(boxes == 7);
    CHECK(count(svg, "<g class=\"node leaf\"") == 4);
    CHECK(count(svg, "<g class=\"node root\"") == 1);
    CHECK(count(svg, "<g class=\"node op\"") == 2);
    CHECK(count(svg, "<path class=\"edge\"") == 6);
    const auto text = texts(svg);
    for (const char* line : {"a", "AccumulateGrad (1)", "data [2.0000]", "grad [6.0000]", "grad [-4.0000]",
                             "MulBackward0 (1)", "AddBackward0 (1)", "data [-8.0000]"}) {
        INFO(line);
        CHECK(std::find(text.begin(), text.end(), line) != text.end());
    }
    // Left to right: every leaf box lies left of the root box.
    auto rect_x = [&](const std::string& group) {
        const size_t at = svg.find("<g class=\"node " + group + "\"");
        return std::stod(attr(svg.substr(svg.find("<rect", at), 200), "x"));
    };
    CHECK(rect_x("leaf") < rect_x("root"));
}

TEST_CASE("draw_graph writes .dot and .svg files; a leaf alone is a graph of one box", "[draw_graph][files]") {
    const auto dir = std::filesystem::temp_directory_path() / "ember_test_draw_graph";
    std::filesystem::create_directories(dir);
    Lecture x;
    draw_graph(x.L, (dir / "g.dot").string());
    draw_graph(x.L, (dir / "g.svg").string());
    CHECK(read_file((dir / "g.dot").string()) == draw_graph(x.L));
    CHECK(read_file((dir / "g.svg").string()) == draw_graph(x.L, GraphFormat::Svg));
    for (const auto& entry : std::filesystem::directory_iterator(dir)) // no temporary file left behind
        CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
    std::filesystem::remove_all(dir);

    // A leaf that requires grad is its own graph: backward() on it works too.
    Tensor a = tensor({2.0}).requires_grad_();
    CHECK(draw_graph(a) ==
          std::string(kHeader) + "    n0 [label=\"AccumulateGrad (1)\\ndata [2.0000]\", fillcolor=\"#d9f2d0\"];\n}\n");
    CHECK(xml_problem(draw_graph(a, GraphFormat::Svg)).empty());
    // Named, it carries its name (its AccumulateGrad exists only while drawn).
    CHECK(draw_graph(a, GraphFormat::Dot, {{"a", a}}).find("n0 [label=\"a\\nAccumulateGrad (1)\\ndata [2.0000]\"") !=
          std::string::npos);
}

TEST_CASE("draw_graph errors name the op, the tensor or the path", "[draw_graph][errors]") {
    Tensor plain = ones({2, 3});
    CHECK_THROWS_AS(draw_graph(plain), AutogradError);
    CHECK_THROWS_WITH(draw_graph(plain), Catch::Contains("[draw_graph]") && Catch::Contains("(2,3)") &&
                                             Catch::Contains("does not require grad"));
    {
        NoGradGuard no_grad;
        Tensor w = ones({2}).requires_grad_();
        Tensor y = w * 2; // recorded nothing
        CHECK_THROWS_AS(draw_graph(y), AutogradError);
    }
    CHECK_THROWS_AS(draw_graph(Tensor()), ValueError);
    CHECK_THROWS_WITH(draw_graph(Tensor()), Catch::Contains("[draw_graph] the tensor is undefined"));

    Lecture x;
    const std::string missing = "no_such_folder_for_ember/g.svg";
    CHECK_THROWS_AS(draw_graph(x.L, missing), ValueError);
    CHECK_THROWS_WITH(draw_graph(x.L, missing),
                      Catch::Contains("[draw_graph] cannot write 'no_such_folder_for_ember/g.svg'"));
    CHECK_FALSE(std::filesystem::exists("no_such_folder_for_ember"));
    const std::string png = "graph.png";
    CHECK_THROWS_AS(draw_graph(x.L, png), ValueError);
    CHECK_THROWS_WITH(draw_graph(x.L, png),
                      Catch::Contains("[draw_graph]") && Catch::Contains("'graph.png'") && Catch::Contains(".svg"));
    CHECK_FALSE(std::filesystem::exists(png));
}
