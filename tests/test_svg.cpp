// Tests for train_gpt's pictures (examples/train/svg.cpp): the loss curve and
// the attention map. They check structure, not a stored copy of the output:
// the text is well-formed XML with one <svg> root and escaped labels; tick
// values are 1/2/5 x 10^k apart and cover the data; NaN and inf points are left
// out; every point lies inside the plot; an attention map has layers x heads
// heatmaps of T*T cells, shaded white (0) to its darkest colour (1); bad
// arguments throw std::invalid_argument naming the sizes; files are written
// whole (through a temporary file and a rename) or not at all.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../examples/train/svg.h"
#include "support/xml.h"

using train::EvalPoint;
using namespace ember::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// xml_problem, tags, attr and texts: tests/support/xml.h.
double num_attr(const std::string& tag, const std::string& name) { return std::stod(attr(tag, name)); }

// The inside of every `<g class="cls" ...>` up to its first `</g>` (these
// groups hold no nested groups).
std::vector<std::string> groups(const std::string& s, const std::string& cls) {
    std::vector<std::string> out;
    const std::string key = "<g class=\"" + cls + "\"";
    for (size_t i = s.find(key); i != std::string::npos; i = s.find(key, i + 1)) {
        const size_t start = s.find('>', i) + 1;
        out.push_back(s.substr(start, s.find("</g>", start) - start));
    }
    return out;
}

struct Pt {
    double x, y;
};

std::vector<Pt> polyline_points(const std::string& svg, const std::string& cls) {
    std::vector<Pt> out;
    for (const std::string& tag : tags(svg, "polyline")) {
        if (attr(tag, "class") != cls) continue;
        std::istringstream in(attr(tag, "points"));
        Pt p{};
        char comma = 0;
        while (in >> p.x >> comma >> p.y) out.push_back(p);
    }
    return out;
}

struct Box {
    double left, top, right, bottom;
    bool holds(Pt p) const { return p.x >= left && p.x <= right && p.y >= top && p.y <= bottom; }
};

Box plot_area(const std::string& svg) {
    const auto rects = tags(svg, "rect");
    const auto it =
        std::find_if(rects.begin(), rects.end(), [](const std::string& t) { return attr(t, "class") == "plot-area"; });
    REQUIRE(it != rects.end());
    const double x = num_attr(*it, "x"), y = num_attr(*it, "y");
    return {x, y, x + num_attr(*it, "width"), y + num_attr(*it, "height")};
}

// A tick label's value: "2.50", "-1", "20k", "1.5M", "3e+09".
double tick_value(const std::string& label) {
    size_t used = 0;
    double v = std::stod(label, &used);
    const std::string suffix = label.substr(used);
    const std::string units = "kMGTPE";
    if (!suffix.empty()) {
        REQUIRE(suffix.size() == 1);
        REQUIRE(units.find(suffix) != std::string::npos);
        v *= std::pow(1000.0, static_cast<double>(units.find(suffix) + 1));
    }
    return v;
}

struct Axis {
    std::vector<double> values; // the tick labels' values
    std::vector<double> pixels; // where each tick sits (x for the x axis, y for the y axis)
};

Axis axis(const std::string& svg, const std::string& cls, const char* coordinate) {
    const auto g = groups(svg, cls);
    REQUIRE(g.size() == 1);
    Axis a;
    for (const std::string& tag : tags(g[0], "text")) a.pixels.push_back(num_attr(tag, coordinate));
    for (const std::string& t : texts(g[0])) a.values.push_back(tick_value(t));
    REQUIRE(a.values.size() == a.pixels.size());
    return a;
}

// Ticks are "nice" and cover [lo, hi]: evenly spaced by 1, 2 or 5 x 10^k,
// 3 to 9 of them, the outermost within a step of the data's ends, and placed
// on a linear scale (equal steps, equal pixel gaps).
void check_ticks(const Axis& a, double lo, double hi) {
    INFO("data [" << lo << ", " << hi << "], " << a.values.size() << " ticks");
    REQUIRE(a.values.size() >= 2);
    CHECK(a.values.size() <= 9);
    const double step = a.values[1] - a.values[0];
    REQUIRE(step > 0);
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    INFO("step " << step << ", mantissa " << mantissa);
    CHECK((std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 || std::abs(mantissa - 5) < 1e-6));
    const double gap = a.pixels[1] - a.pixels[0];
    for (size_t i = 1; i < a.values.size(); ++i) {
        CHECK(a.values[i] - a.values[i - 1] == Approx(step).epsilon(1e-6));
        CHECK(a.pixels[i] - a.pixels[i - 1] == Approx(gap).margin(0.02));
        CHECK(std::abs(std::remainder(a.values[i], step)) <= 1e-6 * std::max(step, std::abs(a.values[i])));
    }
    CHECK(a.values.front() <= lo + step * (1 + 1e-9));
    CHECK(a.values.back() >= hi - step * (1 + 1e-9));
}

// Relative luminance of "#rrggbb", 0 (black) to 1 (white).
double luminance(const std::string& colour) {
    REQUIRE(colour.size() == 7);
    REQUIRE(colour[0] == '#');
    const long rgb = std::strtol(colour.c_str() + 1, nullptr, 16);
    return (0.2126 * ((rgb >> 16) & 255) + 0.7152 * ((rgb >> 8) & 255) + 0.0722 * (rgb & 255)) / 255.0;
}

std::vector<double> synthetic_losses(size_t n) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i)
        v[i] = 1.5 + 2.7 * std::exp(-static_cast<double>(i) / 300.0) + 0.1 * std::sin(i * 1.7);
    return v;
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fresh directory under the system temp directory, removed at the end.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        path = std::filesystem::temp_directory_path() / ("ember_test_svg_" + std::to_string(std::random_device{}()));
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

using Maps = std::vector<std::vector<std::vector<float>>>;

// Causal attention for T positions: row q spreads over keys 0..q, the weights
// differing by head so no two heatmaps are alike; the upper triangle is 0.
Maps causal_maps(size_t layers, size_t heads, size_t T) {
    Maps maps(layers, std::vector<std::vector<float>>(heads, std::vector<float>(T * T, 0.0f)));
    for (size_t l = 0; l < layers; ++l) {
        for (size_t h = 0; h < heads; ++h) {
            for (size_t q = 0; q < T; ++q) {
                double sum = 0;
                for (size_t k = 0; k <= q; ++k) sum += std::exp(-double((q - k) * (h + 1 + l)) / 3.0);
                for (size_t k = 0; k <= q; ++k) {
                    maps[l][h][q * T + k] = static_cast<float>(std::exp(-double((q - k) * (h + 1 + l)) / 3.0) / sum);
                }
            }
        }
    }
    return maps;
}

} // namespace

// ---- the loss curve -----------------------------------------------------------

TEST_CASE("loss curve: a well-formed SVG with escaped text", "[svg][loss]") {
    const std::vector<EvalPoint> evals = {{0, 4.2, 4.25}, {250, 2.6, 2.7}, {500, 2.1, 2.3}};
    const std::string svg = train::loss_curve_svg(synthetic_losses(501), evals, "loss <ember> & \"friends\"",
                                                  std::log(65.0), "ln(65) = 4.17 <uniform>");
    INFO(xml_problem(svg));
    CHECK(xml_problem(svg).empty());
    CHECK(svg.find("loss &lt;ember&gt; &amp; &quot;friends&quot;") != std::string::npos);
    CHECK(svg.find("ln(65) = 4.17 &lt;uniform&gt;") != std::string::npos);
    CHECK(svg.find("<ember>") == std::string::npos);
    // One line per series, markers at every eval, the legend naming all three.
    CHECK(polyline_points(svg, "step-loss").size() > 100);
    CHECK(polyline_points(svg, "eval-train").size() == 3);
    CHECK(polyline_points(svg, "eval-val").size() == 3);
    CHECK(tags(groups(svg, "eval-val-markers").at(0), "circle").size() == 3);
    const auto legend = texts(groups(svg, "legend").at(0));
    CHECK(legend.size() == 3);
    const auto all = texts(svg);
    CHECK(std::find(all.begin(), all.end(), "step") != all.end());
    CHECK(std::find(all.begin(), all.end(), "loss") != all.end());
}

TEST_CASE("loss curve: xmllint-free checks of the checker itself", "[svg][loss]") {
    CHECK(xml_problem("<svg><g></g></svg>").empty());
    CHECK_FALSE(xml_problem("<svg><g></svg>").empty());
    CHECK_FALSE(xml_problem("<svg></svg><svg></svg>").empty());
    CHECK_FALSE(xml_problem("<svg><text>a < b</text></svg>").empty());
    CHECK_FALSE(xml_problem("<svg><text>a & b</text></svg>").empty());
    CHECK_FALSE(xml_problem("<svg><text x=\"<\">a</text></svg>").empty());
}

TEST_CASE("loss curve: ticks are nice, cover the data and sit on a linear scale", "[svg][loss]") {
    struct Case {
        const char* name;
        std::vector<double> steps;
        std::vector<EvalPoint> evals;
        double xlo, xhi, ylo, yhi; // the data's extent
    };
    const std::vector<Case> cases = {
        {"typical run", synthetic_losses(2001), {{0, 4.3, 4.3}, {2000, 1.5, 1.7}}, 0, 2000, 1.4, 4.3},
        {"one point", {3.0}, {}, 0, 0, 3.0, 3.0},
        {"flat loss", std::vector<double>(50, 2.0), {}, 0, 49, 2.0, 2.0},
        {"zero loss", std::vector<double>(10, 0.0), {}, 0, 9, 0.0, 0.0},
        {"huge steps", {}, {{0, 3.0, 3.1}, {500000000000, 2.0, 2.2}, {1000000000000, 1.0, 1.4}}, 0, 1e12, 1.0, 3.1},
        {"tiny loss range", {1.00001, 1.00002, 1.00004}, {}, 0, 2, 1.00001, 1.00004},
        {"huge losses", {1e12, 3e12, 2e12}, {}, 0, 2, 1e12, 3e12},
    };
    for (const Case& c : cases) {
        SECTION(c.name) {
            const std::string svg = train::loss_curve_svg(c.steps, c.evals, c.name);
            CHECK(xml_problem(svg).empty());
            CHECK(svg.find("nan") == std::string::npos);
            CHECK(svg.find("inf") == std::string::npos);
            const Axis x = axis(svg, "x-ticks", "x"), y = axis(svg, "y-ticks", "y");
            check_ticks(x, c.xlo, c.xhi);
            check_ticks(y, c.ylo, c.yhi);
            // Step ticks are whole steps; y pixels fall as the loss rises.
            for (double v : x.values) CHECK(v == std::round(v));
            CHECK(y.pixels.front() > y.pixels.back());
            // Every tick and every point lies inside the plot.
            const Box box = plot_area(svg);
            for (double px : x.pixels) CHECK((px >= box.left && px <= box.right));
            for (double py : y.pixels) CHECK((py >= box.top - 5 && py <= box.bottom + 5)); // label baselines
            for (const char* cls : {"step-loss", "eval-train", "eval-val"}) {
                for (const Pt& p : polyline_points(svg, cls)) CHECK(box.holds(p));
            }
            std::vector<std::string> markers;
            for (const char* cls : {"eval-train-markers", "eval-val-markers"}) {
                for (const std::string& g : groups(svg, cls)) {
                    for (const std::string& c : tags(g, "circle")) markers.push_back(c);
                }
            }
            for (const std::string& c : tags(svg, "circle")) {
                if (attr(c, "class") == "step-loss") markers.push_back(c);
            }
            for (const std::string& c : markers) CHECK(box.holds({num_attr(c, "cx"), num_attr(c, "cy")}));
        }
    }
}

TEST_CASE("loss curve: NaN and inf points are skipped", "[svg][loss]") {
    const std::vector<double> steps = {4.0, kNaN, 3.0, kInf, 2.5, -kInf, 2.2};
    const std::vector<EvalPoint> evals = {{0, 4.0, kNaN}, {3, kNaN, 3.1}, {6, 2.2, 2.4}};
    const std::string svg = train::loss_curve_svg(steps, evals, "with holes", kNaN, "ignored");
    CHECK(xml_problem(svg).empty());
    CHECK(svg.find("nan") == std::string::npos);
    CHECK(svg.find("inf") == std::string::npos);
    CHECK(polyline_points(svg, "step-loss").size() == 4);
    CHECK(polyline_points(svg, "eval-train").size() == 2);
    CHECK(polyline_points(svg, "eval-val").size() == 2);
    // A reference that is NaN is no reference.
    CHECK(svg.find("class=\"reference") == std::string::npos);
    CHECK(svg.find("ignored") == std::string::npos);
    // The axes span the finite values only.
    check_ticks(axis(svg, "y-ticks", "y"), 2.2, 4.0);
}

TEST_CASE("loss curve: one point, no evals, no data", "[svg][loss]") {
    SECTION("a single step is drawn as a dot, with no eval series") {
        const std::string svg = train::loss_curve_svg({3.5}, {}, "one step");
        CHECK(xml_problem(svg).empty());
        const auto circles = tags(svg, "circle");
        REQUIRE(circles.size() == 1);
        CHECK(attr(circles[0], "class") == "step-loss");
        CHECK(polyline_points(svg, "eval-train").empty());
        CHECK(groups(svg, "eval-val-markers").empty());
        CHECK(texts(groups(svg, "legend").at(0)).size() == 1);
    }
    SECTION("only NaN: empty axes and a note, still well-formed") {
        const std::string svg = train::loss_curve_svg({kNaN, kInf}, {{5, kNaN, kNaN}}, "diverged");
        CHECK(xml_problem(svg).empty());
        CHECK(svg.find("class=\"no-data\"") != std::string::npos);
        CHECK(groups(svg, "legend").empty());
        CHECK(tags(svg, "polyline").empty());
        CHECK(axis(svg, "x-ticks", "x").values.size() >= 2);
    }
    SECTION("nothing at all") {
        const std::string svg = train::loss_curve_svg({}, {}, "");
        CHECK(xml_problem(svg).empty());
        CHECK(svg.find("class=\"no-data\"") != std::string::npos);
    }
}

TEST_CASE("loss curve: the reference line is dashed, labelled and in range", "[svg][loss]") {
    const double ref = std::log(65.0);
    const std::string svg = train::loss_curve_svg({3.0, 2.5, 2.0}, {}, "below the reference", ref, "ln(65)");
    CHECK(xml_problem(svg).empty());
    const auto lines = tags(svg, "line");
    const auto it =
        std::find_if(lines.begin(), lines.end(), [](const std::string& t) { return attr(t, "class") == "reference"; });
    REQUIRE(it != lines.end());
    CHECK_FALSE(attr(*it, "stroke-dasharray").empty());
    CHECK(num_attr(*it, "y1") == num_attr(*it, "y2"));
    const Box box = plot_area(svg);
    CHECK(box.holds({num_attr(*it, "x1"), num_attr(*it, "y1")}));
    // The y axis grows to include the reference (4.17) above the data (<= 3).
    check_ticks(axis(svg, "y-ticks", "y"), 2.0, ref);
    CHECK(svg.find(">ln(65)</text>") != std::string::npos);
    // Without a label the value itself is shown.
    CHECK(train::loss_curve_svg({3.0}, {}, "t", ref).find(">4.174</text>") != std::string::npos);
}

TEST_CASE("loss curve: a long run is thinned without losing its extremes", "[svg][loss]") {
    std::vector<double> steps = synthetic_losses(200000);
    steps[123457] = 9.0; // one spike must survive thinning
    const std::string svg = train::loss_curve_svg(steps, {}, "200k steps");
    CHECK(xml_problem(svg).empty());
    CHECK(svg.size() < 400000);
    const auto pts = polyline_points(svg, "step-loss");
    const Box box = plot_area(svg);
    CHECK(pts.size() <= 4 * 2 * static_cast<size_t>(box.right - box.left + 2));
    // The spike is the highest point of the data, so it is the top of the line.
    const double top = std::min_element(pts.begin(), pts.end(), [](Pt a, Pt b) { return a.y < b.y; })->y;
    const Axis y = axis(svg, "y-ticks", "y");
    const double per_unit = (y.pixels.front() - y.pixels.back()) / (y.values.back() - y.values.front());
    CHECK(top == Approx(y.pixels.front() - 4 - (9.0 - y.values.front()) * per_unit).margin(0.2));
    CHECK(pts.front().x == Approx(box.left + (box.right - box.left) * 0.03 / 1.06).margin(0.05));
}

// ---- the attention map --------------------------------------------------------

TEST_CASE("attention map: layers x heads heatmaps of T*T cells", "[svg][attention]") {
    const std::string prompt = "ROMEO:\nI love thee.";
    const size_t T = prompt.size(), layers = 2, heads = 4;
    const std::string svg =
        train::attention_svg(prompt, causal_maps(layers, heads, T), "attention <after> training & more");
    INFO(xml_problem(svg));
    CHECK(xml_problem(svg).empty());
    CHECK(svg.find("attention &lt;after&gt; training &amp; more") != std::string::npos);

    const auto cells = groups(svg, "cells");
    REQUIRE(cells.size() == layers * heads);
    for (const std::string& g : cells) CHECK(tags(g, "rect").size() == T * T);
    CHECK(tags(svg, "g").size() >= layers * heads);
    std::vector<std::string> titles;
    for (const std::string& t : texts(svg)) {
        if (t.rfind("layer ", 0) == 0) titles.push_back(t);
    }
    REQUIRE(titles.size() == layers * heads);
    CHECK(titles.front() == "layer 1, head 1");
    CHECK(titles[1] == "layer 1, head 2");
    CHECK(titles.back() == "layer 2, head 4");

    // Each heatmap labels every position on both axes: keys across, queries down.
    const auto keys = groups(svg, "key-labels"), queries = groups(svg, "query-labels");
    REQUIRE(keys.size() == layers * heads);
    REQUIRE(queries.size() == layers * heads);
    const std::vector<std::string> expected = {
        "R", "O", "M", "E", "O", ":", "\xE2\x8F\x8E", "I", "\xE2\x90\xA3", "l", "o", "v", "e", "\xE2\x90\xA3",
        "t", "h", "e", "e", "."};
    CHECK(texts(keys[0]) == expected);
    CHECK(texts(queries[5]) == expected);

    // Cell (q, k) sits at (k * cell, q * cell); the upper triangle is white.
    const auto rects = tags(cells[0], "rect");
    REQUIRE(rects.size() == T * T);
    const double cell = num_attr(rects[0], "width");
    for (size_t q = 0; q < T; ++q) {
        for (size_t k = 0; k < T; ++k) {
            const std::string& r = rects[q * T + k];
            CHECK(num_attr(r, "x") == k * cell);
            CHECK(num_attr(r, "y") == q * cell);
            if (k > q) CHECK(attr(r, "fill") == "#ffffff");
        }
    }
}

TEST_CASE("attention map: weight 0 is white, 1 the darkest colour, darker with weight", "[svg][attention]") {
    // One 8 x 8 head holding 0, 1/63, ..., 1 in order, so the cells' colours
    // in output order must darken steadily.
    const size_t T = 8;
    std::vector<float> ramp(T * T);
    for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i) / (T * T - 1);
    const std::string svg = train::attention_svg("abcdefgh", {{ramp}}, "ramp");
    CHECK(xml_problem(svg).empty());
    const auto rects = tags(groups(svg, "cells").at(0), "rect");
    REQUIRE(rects.size() == T * T);
    CHECK(attr(rects.front(), "fill") == "#ffffff");
    double previous = 2;
    for (const std::string& r : rects) {
        const double lum = luminance(attr(r, "fill"));
        CHECK(lum <= previous);
        previous = lum;
    }
    CHECK(luminance(attr(rects.back(), "fill")) < 0.25); // 1 is truly dark
    CHECK(luminance(attr(rects[T * T / 2], "fill")) > luminance(attr(rects.back(), "fill")) + 0.2);

    // Out-of-range weights are clamped to the ends of the scale.
    const std::string clamped = train::attention_svg("ab", {{{-0.5f, 1.5f, 0.0f, 1.0f}}}, "clamped");
    const auto c = tags(groups(clamped, "cells").at(0), "rect");
    CHECK(attr(c[0], "fill") == attr(c[2], "fill"));
    CHECK(attr(c[1], "fill") == attr(c[3], "fill"));
    CHECK(attr(c[3], "fill") == attr(rects.back(), "fill"));
}

TEST_CASE("attention map: labels escape XML and show whitespace", "[svg][attention]") {
    const std::string prompt = std::string("<&\"'> \t\n") + '\x01' + "\xC3\xA9";
    const size_t T = prompt.size();
    const std::string svg = train::attention_svg(prompt, causal_maps(1, 2, T), "specials");
    INFO(xml_problem(svg));
    CHECK(xml_problem(svg).empty());
    const std::vector<std::string> expected = {"&lt;",         "&amp;",        "&quot;",       "&apos;",
                                               "&gt;",         "\xE2\x90\xA3", "\xE2\x86\x92", "\xE2\x8F\x8E",
                                               "\xEF\xBF\xBD", "\xEF\xBF\xBD", "\xEF\xBF\xBD"};
    for (const std::string& g : groups(svg, "key-labels")) CHECK(texts(g) == expected);
    for (const std::string& g : groups(svg, "query-labels")) CHECK(texts(g) == expected);
    // A title with a broken UTF-8 byte and a control character still gives valid UTF-8.
    const std::string broken =
        train::attention_svg("ab", {{std::vector<float>(4, 0.5f)}}, "bad \xFF byte \x02 caf\xC3\xA9");
    CHECK(xml_problem(broken).empty());
    CHECK(broken.find("bad \xEF\xBF\xBD byte \xEF\xBF\xBD caf\xC3\xA9") != std::string::npos);
}

TEST_CASE("attention map: BPE tokens are labelled whole, turned upwards", "[svg][attention]") {
    // Tokens as train_gpt --tokenizer gives them: a word with its space, a
    // newline, a character of two bytes, and one longer than 12 characters.
    const std::vector<std::string> tokens = {"Nor", " is", "\n", "caf\xC3\xA9", "\xC3", "abcdefghijklmnop"};
    const std::string svg = train::attention_svg(tokens, causal_maps(2, 2, tokens.size()), "tokens");
    INFO(xml_problem(svg));
    CHECK(xml_problem(svg).empty());
    const std::vector<std::string> expected = {"Nor",         "\xE2\x90\xA3is", "\xE2\x8F\x8E",
                                               "caf\xC3\xA9", "\xEF\xBF\xBD",   "abcdefghijkl\xE2\x80\xA6"};
    for (const std::string& g : groups(svg, "key-labels")) CHECK(texts(g) == expected);
    for (const std::string& g : groups(svg, "query-labels")) CHECK(texts(g) == expected);
    // The keys' labels read upwards (one rotation per key and heatmap); a
    // prompt of single characters keeps them upright.
    size_t rotations = 0;
    for (size_t at = svg.find("rotate(-90 "); at != std::string::npos; at = svg.find("rotate(-90 ", at + 1))
        ++rotations;
    CHECK(rotations == 2 * 2 * tokens.size());
    CHECK(train::attention_svg("abc", causal_maps(1, 1, 3), "t").find("rotate(") == std::string::npos);
    // One byte a token is the character prompt's picture, byte for byte.
    CHECK(train::attention_svg(std::vector<std::string>{"a", " ", "\xC3"}, causal_maps(1, 1, 3), "t") ==
          train::attention_svg("a \xC3", causal_maps(1, 1, 3), "t"));
}

TEST_CASE("attention map: sizes scale with T and stay readable", "[svg][attention]") {
    auto cell_size = [](size_t T) {
        const std::string svg = train::attention_svg(std::string(T, 'x'), causal_maps(1, 1, T), "t");
        return num_attr(tags(groups(svg, "cells").at(0), "rect").at(0), "width");
    };
    CHECK(cell_size(4) == 24);
    CHECK(cell_size(16) == 24);
    CHECK(cell_size(32) == 12);
    CHECK(cell_size(64) == 9);
    CHECK(cell_size(200) == 9);
    // The largest grid the trainer draws: 6 x 6 heads of T = 64.
    const std::string big = train::attention_svg(std::string(64, 'y'), causal_maps(6, 6, 64), "6 x 6");
    CHECK(xml_problem(big).empty());
    CHECK(groups(big, "cells").size() == 36);
    const auto root = tags(big, "svg").at(0);
    CHECK(num_attr(root, "width") < 4000);
    CHECK(num_attr(root, "height") < 4000);
}

TEST_CASE("attention map: bad arguments throw invalid_argument naming the sizes", "[svg][attention][errors]") {
    using Catch::Contains;
    const Maps ok = causal_maps(2, 2, 3);
    CHECK_THROWS_AS(train::attention_svg("", {{{}}}, "t"), std::invalid_argument);
    CHECK_THROWS_WITH(train::attention_svg("", {{{}}}, "t"), Contains("[attention_svg]") && Contains("T = 0"));
    CHECK_THROWS_AS(train::attention_svg("abc", {}, "t"), std::invalid_argument);
    CHECK_THROWS_WITH(train::attention_svg("abc", {}, "t"), Contains("maps is empty") && Contains("3 x 3"));
    Maps no_heads = ok;
    no_heads[1].clear();
    CHECK_THROWS_AS(train::attention_svg("abc", no_heads, "t"), std::invalid_argument);
    CHECK_THROWS_WITH(train::attention_svg("abc", no_heads, "t"), Contains("layer 1 has no heads"));
    Maps ragged = ok;
    ragged[1].pop_back();
    CHECK_THROWS_AS(train::attention_svg("abc", ragged, "t"), std::invalid_argument);
    CHECK_THROWS_WITH(train::attention_svg("abc", ragged, "t"), Contains("layer 1 has 1 heads but layer 0 has 2"));
    Maps wrong = ok;
    wrong[1][0].resize(8);
    CHECK_THROWS_AS(train::attention_svg("abc", wrong, "t"), std::invalid_argument);
    CHECK_THROWS_WITH(train::attention_svg("abc", wrong, "t"),
                      Contains("maps[1][0] has 8 weights") && Contains("T*T = 9") && Contains("T = 3"));
    CHECK_THROWS_WITH(train::attention_svg("abcd", ok, "t"),
                      Contains("maps[0][0] has 9 weights") && Contains("T*T = 16"));
}

// ---- writing files --------------------------------------------------------------

TEST_CASE("write_ functions save exactly the text, through a temporary file", "[svg][files]") {
    TempDir dir;
    const std::string loss_path = (dir.path / "loss.svg").string(), att_path = (dir.path / "attention.svg").string();
    const std::vector<double> losses = synthetic_losses(100);
    const std::vector<EvalPoint> evals = {{0, 4.2, 4.3}, {99, 2.0, 2.2}};
    train::write_loss_curve_svg(loss_path, losses, evals, "t", 4.17, "ln(65)");
    CHECK(read_file(loss_path) == train::loss_curve_svg(losses, evals, "t", 4.17, "ln(65)"));
    const Maps maps = causal_maps(1, 2, 5);
    train::write_attention_svg(att_path, "hello", maps, "a");
    CHECK(read_file(att_path) == train::attention_svg("hello", maps, "a"));
    // Writing again replaces the old picture, and no .tmp file is left behind.
    train::write_loss_curve_svg(loss_path, {3.0}, {}, "second");
    CHECK(read_file(loss_path) == train::loss_curve_svg({3.0}, {}, "second"));
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(loss_path).parent_path()))
        CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("write_ functions throw runtime_error naming the path, leaving the old file", "[svg][files][errors]") {
    using Catch::Contains;
    TempDir dir;
    SECTION("a directory that does not exist") {
        const std::string path = (dir.path / "missing" / "loss.svg").string();
        CHECK_THROWS_AS(train::write_loss_curve_svg(path, {1.0}, {}, "t"), std::runtime_error);
        CHECK_THROWS_WITH(train::write_loss_curve_svg(path, {1.0}, {}, "t"), Contains(path));
        CHECK_THROWS_WITH(train::write_attention_svg(path, "a", {{{1.0f}}}, "t"), Contains(path));
    }
    SECTION("a link planted at the old fixed temporary name is not followed") {
        // Earlier versions wrote PATH.tmp, through any link someone had put
        // there; the temporary file is now a new one, created exclusively.
        const std::string path = (dir.path / "loss.svg").string(), victim = (dir.path / "victim").string();
        std::ofstream(victim) << "precious";
        std::error_code no_links;
        std::filesystem::create_symlink(victim, path + ".tmp", no_links);
        if (no_links) {
            // Wine has none, nor Windows without the privilege to make one.
            WARN("skipped: no symbolic links here (" << no_links.message() << ")");
            return;
        }
        train::write_loss_curve_svg(path, {2.0}, {}, "new");
        CHECK(read_file(victim) == "precious");
        CHECK(read_file(path) == train::loss_curve_svg({2.0}, {}, "new"));
    }
    SECTION("the rename fails (the path is a directory): no .tmp is left") {
        const std::string path = (dir.path / "taken").string();
        std::filesystem::create_directory(path);
        std::ofstream(dir.path / "taken" / "keep") << "x"; // a non-empty directory cannot be replaced
        CHECK_THROWS_AS(train::write_attention_svg(path, "ab", {{std::vector<float>(4, 0.5f)}}, "t"),
                        std::runtime_error);
        CHECK_THROWS_WITH(train::write_attention_svg(path, "ab", {{std::vector<float>(4, 0.5f)}}, "t"), Contains(path));
        for (const auto& entry : std::filesystem::directory_iterator(dir.path))
            CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
        CHECK(std::filesystem::is_directory(path));
    }
}

TEST_CASE("lines chart: one line per series, legend labels escaped, dashes after ten, reference", "[svg][lines]") {
    std::vector<train::Series> series;
    for (int k = 0; k < 12; ++k)
        series.push_back({"w<" + std::to_string(k) + ">", {0, 1, 2}, {double(k), double(k) + 1, NAN}});
    const std::string svg = train::lines_svg("t & u", "sub", "step", "log10 ratio", series, -3.0, "1e-3");
    CHECK(xml_problem(svg).empty());
    const auto lines = tags(svg, "polyline");
    REQUIRE(lines.size() == 12); // the NaN point is left out: two points a line
    CHECK(attr(lines[0], "stroke") == "#1f77b4");
    CHECK(attr(lines[10], "stroke") == "#1f77b4"); // the colours come round again, dashed
    CHECK(attr(lines[10], "stroke-dasharray") == "5 3");
    CHECK(attr(lines[0], "stroke-dasharray").empty());
    CHECK(svg.find("w&lt;11&gt;") != std::string::npos);
    CHECK(svg.find("t &amp; u") != std::string::npos);
    CHECK(svg.find("class=\"reference\"") != std::string::npos);
    CHECK(svg.find("no finite values") == std::string::npos);
    const std::string empty = train::lines_svg("t", "", "x", "y", {{"nan", {NAN}, {NAN}}});
    CHECK(xml_problem(empty).empty());
    CHECK(empty.find("no finite values to plot") != std::string::npos);
}
