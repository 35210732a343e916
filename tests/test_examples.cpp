// The attention_* examples print what their notebooks' code prints in
// PyTorch (tests/fixtures/fx_examples.py holds the PyTorch twins; with the
// notebooks' seeds, that is the notebooks' numbers): the same text, and the
// same numbers to the last printed digit.
// autograd_demo prints micrograd's numbers and writes the graph picture
// docs/autograd.md shows.
#include <catch2/catch.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "check.h"
#include "process.h"

using namespace ember::testing;

namespace {

// Compares two printouts: numbers must agree to within one unit of the last
// digit PyTorch printed (kernels may sum in another order and round the last
// printed digit the other way), everything else character for character.
// Returns the byte offset of the first difference, or npos.
size_t first_difference(const std::string& got, const std::string& expected) {
    auto number_at = [](const std::string& s, size_t i) {
        return std::isdigit(static_cast<unsigned char>(s[i])) ||
               (s[i] == '-' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])));
    };
    size_t i = 0, j = 0;
    while (i < got.size() && j < expected.size()) {
        if (number_at(got, i) && number_at(expected, j)) {
            char* end_g;
            char* end_e;
            double g = std::strtod(got.c_str() + i, &end_g);
            double e = std::strtod(expected.c_str() + j, &end_e);
            std::string text(expected.c_str() + j, static_cast<size_t>(end_e - (expected.c_str() + j)));
            // One unit of the last printed digit: 1e-4 for "0.1234", 1e-6 for "5.4878e-02".
            size_t dot = text.find('.'), exp = text.find_first_of("eE");
            size_t digits = dot == std::string::npos ? 0 : (exp == std::string::npos ? text.size() : exp) - dot - 1;
            double unit = std::pow(10.0, -static_cast<double>(digits));
            if (exp != std::string::npos) unit *= std::pow(10.0, std::stod(text.substr(exp + 1)));
            if (std::abs(g - e) > 1.01 * unit) return i;
            i = static_cast<size_t>(end_g - got.c_str());
            j = static_cast<size_t>(end_e - expected.c_str());
            continue;
        }
        if (got[i] != expected[j]) return i;
        ++i;
        ++j;
    }
    return i == got.size() && j == expected.size() ? std::string::npos : i;
}

} // namespace

TEST_CASE("the attention examples print their notebooks' numbers", "[examples]") {
    for (const char* name : {"attention_averaging", "attention_single_head", "attention_multihead", "attention_batched",
                             "attention_causal_dropout"}) {
        DYNAMIC_SECTION(name) {
            std::string got = run_command(std::string(EMBER_EXAMPLES_DIR) + "/" + name).out;
            std::string expected = fixtures("examples").text(std::string("output.") + name);
            size_t at = first_difference(got, expected);
            if (at != std::string::npos) {
                size_t line_start = got.rfind('\n', at == 0 ? 0 : at - 1);
                line_start = line_start == std::string::npos ? 0 : line_start + 1;
                INFO("first difference at byte " << at << " of ember's output, in the line\n"
                                                 << got.substr(line_start, got.find('\n', at) - line_start)
                                                 << "\nPyTorch printed:\n"
                                                 << expected);
                CHECK(at == std::string::npos);
            }
        }
    }
}

// autograd_demo draws micrograd's graph; docs/autograd.md shows the SVG it
// wrote, committed as docs/images/autograd_graph.svg. The two must stay the
// same: after a change to draw_graph, run the demo into docs/images/.
TEST_CASE("autograd_demo prints micrograd's numbers and the picture in the docs", "[examples]") {
    const auto dir = std::filesystem::temp_directory_path() / "ember_test_autograd_demo";
    std::filesystem::create_directories(dir);
    const CommandResult run = run_command(std::string(EMBER_EXAMPLES_DIR) + "/autograd_demo " + dir.string());
    CHECK(run.status == 0);
    // micrograd's README prints these three numbers for the same expression.
    for (const char* line : {"g     = 24.7041", "dg/da = 138.8338", "dg/db = 645.5773"}) {
        INFO(line);
        CHECK(run.out.find(line) != std::string::npos);
    }
    auto read = [](const std::filesystem::path& p) {
        std::ifstream in(p, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    const std::string svg = read(dir / "autograd_graph.svg");
    CHECK(svg.find("<svg") != std::string::npos);
    CHECK(read(dir / "autograd_graph.dot").rfind("digraph autograd {", 0) == 0);
    INFO("docs/images/autograd_graph.svg is out of date: run autograd_demo docs/images");
    CHECK(svg == read(std::filesystem::path(EMBER_DOCS_DIR) / "images" / "autograd_graph.svg"));
    std::filesystem::remove_all(dir);
}
