// ember's side of the differential fuzzer: reads fuzz programs and PyTorch's
// results for them (the text format of tests/fuzz/program.py), runs each
// program through ember's public API, and compares.
//
// check_program runs a program three times: in float64 (compared with
// PyTorch's float64 results, tight tolerance) and in float32 at 1 and at 2
// threads (the two runs must agree to the bit, and stay within float32's
// tolerance of PyTorch). Used by tests/test_fuzz.cpp (CI's committed
// programs) and tests/fuzz/fuzz_check.cpp (the long mode). tests/fuzz/README.md
// explains the whole loop.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ember.h>

namespace ember::fuzz {

// One line `out = op args...` of a program.
struct Line {
    std::string out;
    std::string op;
    std::vector<std::string> args;
};

// One `expect` line: PyTorch's result for a checked tensor or a leaf's
// gradient (key grad.<leaf>). A full expectation holds every value; a
// fingerprint (for large tensors) holds max|t| and three projections p_j =
// sum_i t_i w_j(i) with their scales s_j = sum_i |t_i w_j(i)|.
struct Expectation {
    std::string key;
    bool full = true;
    Shape shape;
    // Widens the float32 tolerance where PyTorch's own float32 result is
    // far from its float64 one (4 times that error; at least 1): an
    // ill-conditioned value, such as a 0 left over from cancelling terms.
    double float32_slack = 1;
    std::vector<double> values; // full: the values; fingerprint: maxabs, p0, s0, p1, s1, p2, s2
};

struct Program {
    std::string name;
    std::string text; // the program as written, for reports
    std::vector<Line> lines;
    std::vector<std::string> checks;
    std::vector<Expectation> expected;
};

// Every program in a file, each with the `expect` lines that follow it.
// Throws std::runtime_error on a malformed file.
std::vector<Program> read_programs(const std::string& path);

// The checked tensors (by name) and the gradient of every grad leaf
// (grad.<leaf>; zeros when backward never reached it), in float64, after
// running the program with its leaves in `dtype` and backpropagating from
// `loss`.
using Results = std::vector<std::pair<std::string, Tensor>>;
Results run(const Program& program, DType dtype);

struct Tolerance {
    double rtol;
    double atol;                // relative to max(1, max|expected|) of the tensor
    bool float32_slack = false; // times each expectation's float32_slack
};
// ember float64 against PyTorch float64: only summation order differs.
inline constexpr Tolerance kFloat64Tolerance{1e-9, 1e-9};
// ember float32 against PyTorch float64: float32 rounding through up to a
// dozen ops, LayerNorm and softmax included (tests/fuzz/README.md).
inline constexpr Tolerance kFloat32Tolerance{1e-3, 1e-4, true};

// What differs between ember's results and the program's expectations,
// one line per problem (empty: all within tolerance). `worst` receives the
// largest error as a fraction of its allowance (1 = at the tolerance).
std::vector<std::string> compare(const Program& program, const Results& results, Tolerance tol,
                                 double* worst = nullptr);

// Which results of two runs differ in any bit.
std::vector<std::string> compare_bits(const Results& a, const Results& b);

// All the checks of one program (see the file comment); each problem is
// prefixed with the run it came from. Leaves the thread count as it found it.
struct Report {
    std::vector<std::string> problems;
    double worst64 = 0;
    double worst32 = 0;
};
Report check_program(const Program& program);

// The i-th splitmix64 draw from `seed`, in [0, 1): the leaves' values.
double uniform(uint64_t seed, uint64_t i);

} // namespace ember::fuzz
