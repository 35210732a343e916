// Differential fuzzing against PyTorch, CI's part: a few hundred random
// programs over ember's public API (views, broadcasting, reductions,
// softmax, layer_norm, matmul, cat, masked_fill, where, indexing) with
// PyTorch's float64 values and leaf gradients committed in tests/fuzz/ci.txt,
// and every mismatch the fuzzer ever found, named, in tests/fuzz/regressions.txt.
// Each program runs in float64 and in float32 at 1 and 2 threads
// (tests/fuzz/interpreter.h). How it works and the long mode: tests/fuzz/README.md.
#include <algorithm>

#include <catch2/catch.hpp>

#include "interpreter.h"

using namespace ember;

namespace {

void check_file(const std::string& file) {
    auto programs = fuzz::read_programs(std::string(EMBER_FUZZ_DIR) + "/" + file);
    REQUIRE(!programs.empty());
    for (const auto& program : programs) {
        REQUIRE(!program.expected.empty());
        fuzz::Report report = fuzz::check_program(program);
        std::string problems;
        for (const auto& p : report.problems) problems += "  " + p + "\n";
        INFO(program.name << " mismatches:\n" << problems << program.text);
        CHECK(report.problems.empty());
    }
}

} // namespace

TEST_CASE("fuzz programs match PyTorch in float64 and float32, at 1 and 2 threads", "[fuzz]") { check_file("ci.txt"); }

TEST_CASE("every mismatch the fuzzer found stays fixed", "[fuzz][regression]") { check_file("regressions.txt"); }

TEST_CASE("a wrong result is caught: the checker can fail", "[fuzz]") {
    // The first CI program with its first expectation nudged beyond tolerance.
    auto programs = fuzz::read_programs(std::string(EMBER_FUZZ_DIR) + "/ci.txt");
    fuzz::Program program = programs.at(0);
    REQUIRE(!program.expected.empty());
    auto& e = program.expected[0];
    REQUIRE(e.full);
    e.values[0] += 1e-3 * std::max(1.0, std::abs(e.values[0]));
    auto problems = fuzz::compare(program, fuzz::run(program, kFloat64), fuzz::kFloat64Tolerance);
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], Catch::Contains(e.key));
}

TEST_CASE("a wrong element of a large result is caught through its fingerprint", "[fuzz]") {
    auto programs = fuzz::read_programs(std::string(EMBER_FUZZ_DIR) + "/ci.txt");
    auto large = std::find_if(programs.begin(), programs.end(), [](const fuzz::Program& p) {
        return std::any_of(p.expected.begin(), p.expected.end(), [](const auto& e) { return !e.full; });
    });
    REQUIRE(large != programs.end());
    fuzz::Results results = fuzz::run(*large, kFloat64);
    REQUIRE(fuzz::compare(*large, results, fuzz::kFloat64Tolerance).empty());
    for (auto& [key, value] : results) {
        if (value.numel() <= 64) continue;
        Tensor wrong = value.clone();
        wrong.view({-1}).select(0, 0).add_(1.0); // one element off by 1
        value = wrong;
        INFO("changed " << key << " of " << large->name);
        auto problems = fuzz::compare(*large, results, fuzz::kFloat64Tolerance);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains(key) && Catch::Contains("fingerprint"));
        break;
    }
}
