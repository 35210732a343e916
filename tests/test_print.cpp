// Tests for the printer (core/tensor/print.cpp, core/tensor/print.h): ember's to_string of a
// tensor must equal PyTorch 1.13's repr() of it, character for character.
//
// The cases come from tests/fixtures/fx_print.py (print.txt): for each case
// <group>.<name> the input tensor, torch's text, and optionally a "build" (how
// the printed tensor is made from the input: a view, or an op recording
// autograd history) and the torch.set_printoptions keywords in force. The
// remaining tests check set_printoptions itself, errors, and that printing
// leaves autograd alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <ember.h>

#include "fixtures.h"

using namespace ember;
using ember::testing::Fixtures;

namespace {

const Fixtures& print_fixtures() {
    static const Fixtures f("print");
    return f;
}

// Puts PyTorch's default options in force for one test and again when it
// ends, passed or failed, so no test sees another's options.
struct DefaultOptions {
    DefaultOptions() { set_printoptions(PrintOptions{}); }
    ~DefaultOptions() { set_printoptions(PrintOptions{}); }
    DefaultOptions(const DefaultOptions&) = delete;
    DefaultOptions& operator=(const DefaultOptions&) = delete;
};

std::vector<std::string> split(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

// fx_print.py's BUILDS, with ember ops.
Tensor build(const std::string& how, Tensor x) {
    if (how == "transpose") return x.transpose(0, 1);
    if (how == "permute_201") return x.permute({2, 0, 1});
    if (how == "step2") return x.slice(1, None, None, 2);
    if (how == "select1") return x.select(0, 1);
    if (how == "expand") {
        Shape shape = x.shape();
        shape.insert(shape.begin(), 3);
        return x.unsqueeze(0).expand(shape);
    }
    if (how == "requires_grad") return x.requires_grad_();
    x.requires_grad_();
    if (how == "mul_self") return x * x;
    if (how == "add_self") return x + x;
    if (how == "neg") return -x;
    if (how == "sum0") return x.sum(0);
    if (how == "grad_transpose") return x.transpose(0, 1);
    FAIL("fixture names an unknown build: " << how);
    return x;
}

// The keywords of one torch.set_printoptions call, "precision=2
// threshold=inf sci_mode=True", through ember's torch-like overload.
void apply_options(const std::string& text) {
    std::optional<int64_t> precision, edgeitems, linewidth;
    std::optional<double> threshold;
    std::optional<bool> sci_mode;
    for (const std::string& item : split(text)) {
        size_t eq = item.find('=');
        std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "precision") precision = std::stoll(value);
        else if (key == "threshold")
            threshold = value == "inf" ? std::numeric_limits<double>::infinity() : std::stod(value);
        else if (key == "edgeitems") edgeitems = std::stoll(value);
        else if (key == "linewidth") linewidth = std::stoll(value);
        else if (key == "sci_mode") sci_mode = value == "True";
        else FAIL("fixture names an unknown print option: " << key);
    }
    set_printoptions(precision, threshold, edgeitems, linewidth, sci_mode);
}

void check_case(const std::string& name) {
    const Fixtures& f = print_fixtures();
    DefaultOptions defaults;
    Tensor t = f.tensor(name + ".in");
    if (f.has(name + ".build")) t = build(f.text(name + ".build"), t);
    if (f.has(name + ".options")) apply_options(f.text(name + ".options"));
    const std::string& expected = f.text(name + ".repr");
    std::string actual = to_string(t);
    INFO("case " << name << "\n-- PyTorch:\n" << expected << "\n-- ember:\n" << actual);
    REQUIRE(actual == expected);
}

// Every case of one group, each in its own section so that all failures show.
// A group with no case fails: a renamed group must not pass by testing nothing.
void check_group(const std::string& group) {
    int found = 0;
    for (const std::string& name : split(print_fixtures().text("cases"))) {
        if (name.rfind(group + ".", 0) != 0) continue;
        ++found;
        DYNAMIC_SECTION(name) { check_case(name); }
    }
    REQUIRE(found > 0);
}

const std::vector<std::string> kGroups = {"seed",      "zero_dim", "fixed",    "rounding", "int_mode", "sci",
                                          "nonfinite", "shapes",   "int64",    "bool",     "empty",    "summarize",
                                          "wrap",      "views",    "autograd", "options"};

} // namespace

// ---- PyTorch's text, case by case ---------------------------------------------------

TEST_CASE("print: the notebooks' outputs", "[print]") { check_group("seed"); }
TEST_CASE("print: 0-d tensors", "[print]") { check_group("zero_dim"); }
TEST_CASE("print: fixed notation, aligned to the widest element", "[print]") { check_group("fixed"); }
TEST_CASE("print: digits round as Python's format does", "[print]") { check_group("rounding"); }
TEST_CASE("print: integer-valued floats print as '2.'", "[print]") { check_group("int_mode"); }
TEST_CASE("print: scientific notation", "[print]") { check_group("sci"); }
TEST_CASE("print: nan, inf and -inf", "[print]") { check_group("nonfinite"); }
TEST_CASE("print: nested brackets and blank lines for n-D tensors", "[print]") { check_group("shapes"); }
TEST_CASE("print: int64 tensors", "[print]") { check_group("int64"); }
TEST_CASE("print: bool tensors", "[print]") { check_group("bool"); }
TEST_CASE("print: empty tensors spell out size and dtype", "[print]") { check_group("empty"); }
TEST_CASE("print: more than 1000 elements are summarised with '...'", "[print]") { check_group("summarize"); }
TEST_CASE("print: long rows wrap at 80 columns", "[print]") { check_group("wrap"); }
TEST_CASE("print: non-contiguous views print their logical values", "[print]") { check_group("views"); }
TEST_CASE("print: requires_grad and grad_fn suffixes", "[print]") { check_group("autograd"); }
TEST_CASE("print: set_printoptions", "[print]") { check_group("options"); }

TEST_CASE("print: every fixture case belongs to a tested group", "[print]") {
    std::vector<std::string> cases = split(print_fixtures().text("cases"));
    REQUIRE(cases.size() > 100);
    for (const std::string& name : cases) {
        std::string group = name.substr(0, name.find('.'));
        INFO("case " << name);
        CHECK(std::find(kGroups.begin(), kGroups.end(), group) != kGroups.end());
    }
}

// ---- the same text from tensors ember computes --------------------------------------

TEST_CASE("print: the notebook's attention weights, computed by ember", "[print]") {
    DefaultOptions defaults;
    // a = torch.tril(torch.ones(3, 3)); a = a / torch.sum(a, 1, keepdim=True)
    Tensor a = tril(ones({3, 3}));
    a = a / a.sum(1, true);
    REQUIRE(to_string(a) == print_fixtures().text("seed.tril_mean.repr"));
    // wei = zeros.masked_fill(tril == 0, -inf); softmax(wei, dim=1) is the same matrix.
    Tensor wei = zeros({3, 3}).masked_fill(tril(ones({3, 3})) == 0, -std::numeric_limits<double>::infinity());
    REQUIRE(to_string(wei) == print_fixtures().text("seed.wei_masked.repr"));
    REQUIRE(to_string(softmax(wei, 1)) == print_fixtures().text("seed.wei_softmax.repr"));
}

TEST_CASE("print: operator<< writes to_string", "[print]") {
    DefaultOptions defaults;
    Tensor x = print_fixtures().tensor("seed.randn_1337.in");
    std::ostringstream out;
    out << x;
    REQUIRE(out.str() == print_fixtures().text("seed.randn_1337.repr"));
}

TEST_CASE("print: a NaN with its sign bit set prints as nan", "[print]") {
    DefaultOptions defaults;
    double negative_nan = std::copysign(std::numeric_limits<double>::quiet_NaN(), -1.0);
    Tensor x = from_vector(std::vector<double>{negative_nan, 1.5}, {2}, kFloat32);
    REQUIRE(std::signbit(x.data_ptr<float>()[0]));
    REQUIRE(to_string(x) == print_fixtures().text("negative_nan.vector"));
    REQUIRE(to_string(x[0]) == print_fixtures().text("negative_nan.scalar"));
}

TEST_CASE("print: an undefined tensor prints as libtorch prints it", "[print]") {
    REQUIRE(to_string(Tensor()) == "[ Tensor (undefined) ]");
}

// ---- set_printoptions ----------------------------------------------------------------

TEST_CASE("print: set_printoptions keeps the options not given, as torch", "[print]") {
    DefaultOptions defaults;
    set_printoptions(2);
    set_printoptions(std::nullopt, 5.0);
    const PrintOptions& o = get_printoptions();
    CHECK(o.precision == 2);
    CHECK(o.threshold == 5.0);
    CHECK(o.edgeitems == 3);
    CHECK(o.linewidth == 80);
    // torch.set_printoptions(precision=2); torch.set_printoptions(threshold=5); repr(torch.arange(10.) / 3)
    REQUIRE(to_string(arange(10.0) / 3) == print_fixtures().text("sequence.precision_then_threshold"));
}

TEST_CASE("print: set_printoptions resets sci_mode unless it is given, as torch", "[print]") {
    DefaultOptions defaults;
    set_printoptions(std::nullopt, std::nullopt, std::nullopt, std::nullopt, true);
    REQUIRE(get_printoptions().sci_mode == std::optional<bool>(true));
    set_printoptions(6);
    CHECK(get_printoptions().precision == 6);
    REQUIRE_FALSE(get_printoptions().sci_mode.has_value());
    // torch.set_printoptions(sci_mode=True); torch.set_printoptions(precision=6); repr(torch.tensor([1.5, 2.]))
    REQUIRE(to_string(tensor({1.5f, 2.f})) == print_fixtures().text("sequence.sci_mode_then_precision"));
}

TEST_CASE("print: set_printoptions(PrintOptions{}) restores the defaults", "[print]") {
    DefaultOptions defaults;
    set_printoptions(PrintOptions{.precision = 1, .threshold = 2, .edgeitems = 1, .linewidth = 20, .sci_mode = true});
    Tensor x = print_fixtures().tensor("fixed.simple.in");
    REQUIRE(to_string(x) != print_fixtures().text("fixed.simple.repr"));
    set_printoptions(PrintOptions{});
    const PrintOptions& o = get_printoptions();
    CHECK(o.precision == 4);
    CHECK(o.threshold == 1000);
    CHECK(o.edgeitems == 3);
    CHECK(o.linewidth == 80);
    CHECK_FALSE(o.sci_mode.has_value());
    REQUIRE(to_string(x) == print_fixtures().text("fixed.simple.repr"));
}

TEST_CASE("print: set_printoptions refuses what cannot be printed and changes nothing", "[print]") {
    DefaultOptions defaults;
    set_printoptions(3);
    using Catch::Matchers::Contains;
    REQUIRE_THROWS_AS(set_printoptions(-1), ValueError);
    REQUIRE_THROWS_WITH(set_printoptions(-1),
                        Contains("[set_printoptions] precision must be between 0 and 1000, got -1"));
    REQUIRE_THROWS_AS(set_printoptions(1001), ValueError);
    REQUIRE_THROWS_AS(set_printoptions(PrintOptions{.edgeitems = 0}), ValueError);
    REQUIRE_THROWS_WITH(set_printoptions({.edgeitems = 0}),
                        Contains("[set_printoptions] edgeitems must be at least 1, got 0"));
    REQUIRE(get_printoptions().precision == 3);
    REQUIRE(get_printoptions().edgeitems == 3);
}

// ---- printing and autograd ------------------------------------------------------------

TEST_CASE("print: printing records no autograd history", "[print]") {
    DefaultOptions defaults;
    Tensor x = print_fixtures().tensor("autograd.mul.in").requires_grad_();
    Tensor y = x * x;
    auto node = y.grad_fn();
    int64_t nodes = Node::live_count();
    std::string text = to_string(y) + to_string(x);
    CHECK(Node::live_count() == nodes);
    CHECK(y.grad_fn() == node);
    CHECK(x.is_leaf());
    CHECK_FALSE(x.grad().defined());
    REQUIRE(to_string(y) == print_fixtures().text("autograd.mul.repr"));
}

TEST_CASE("print: under no_grad, a result has no grad_fn to print", "[print]") {
    DefaultOptions defaults;
    Tensor x = tensor({1.f, 2.f}).requires_grad_();
    Tensor y;
    {
        NoGradGuard no_grad;
        y = x * x;
    }
    // torch: with torch.no_grad(): y = x * x; then repr(y), repr(x)
    REQUIRE(to_string(y) == print_fixtures().text("no_grad.result"));
    REQUIRE(to_string(x) == print_fixtures().text("no_grad.leaf"));
}

TEST_CASE("print: a shape and strides print as PyTorch's C++ frontend prints them", "[print]") {
    // `std::cout << t.strides()` was 357 lines of template errors: a Shape
    // (a std::vector) had no operator<<.
    Tensor t = zeros({2, 3, 4}).transpose(0, 2);
    std::ostringstream out;
    out << t.shape() << " " << t.strides() << " " << zeros({}).shape();
    // LibTorch: std::cout << t.sizes() << " " << t.strides() prints "[4, 3, 2] [1, 4, 12]".
    CHECK(out.str() == "[4, 3, 2] [1, 4, 12] []");
}
