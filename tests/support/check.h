// Assertions shared by ember's Catch2 tests: tensors close to PyTorch's, and
// the standard check of an op against a fixture case (values, gradients, and
// a finite-difference gradient check). tests/README.md shows how to use them.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ember.h>

#include "fixtures.h"

namespace ember::testing {

struct Tolerance {
    double rtol = 1e-5;
    double atol = 1e-6;
};

// REQUIREs equal shapes and dtypes and |actual - expected| <= atol + rtol*|expected|
// everywhere (NaN matches NaN, inf matches the same inf). A failure reports the
// largest difference and the first element out of tolerance.
void require_close(const Tensor& actual, const Tensor& expected, Tolerance tol = {}, const std::string& what = "");

// REQUIREs the same shape, dtype and bits (for int64, bool, and exact floats).
void require_equal(const Tensor& actual, const Tensor& expected, const std::string& what = "");

// n deterministic pseudo-random floats in [-1, 1) (a linear congruential
// sequence from `seed`): matrices for the product tests.
std::vector<float> pattern_values(int64_t n, uint32_t seed);

// A page of memory, and a float tensor of exactly `bytes` bytes (a whole
// number of pages): what the storage and buffer cache tests allocate.
constexpr size_t kPage = 4096;
inline Tensor block(size_t bytes) { return empty({static_cast<int64_t>(bytes / sizeof(float))}); }

// Exactly two threads for a scope (as in CI), with the busy-machine policy
// off (Note [Threads on a busy machine]), so that parallel loops really
// split: for kernels that take another path on two threads than on one or
// on more, and for the tests of parallel_for and parallel_team themselves.
struct TwoThreads {
    int threads = get_num_threads();
    bool adaptive = adaptive_threads();
    TwoThreads() {
        set_num_threads(std::min(2, max_num_threads()));
        set_adaptive_threads(false);
    }
    ~TwoThreads() {
        set_adaptive_threads(adaptive);
        set_num_threads(threads);
    }
    TwoThreads(const TwoThreads&) = delete;
    TwoThreads& operator=(const TwoThreads&) = delete;
};

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Fixture case `name` (written by FixtureFile.case): runs op on name.in0,
// name.in1, ...; compares the output with name.out; backpropagates name.dout;
// compares each floating input's gradient with name.din<i>.
void check_case(const Fixtures& fixtures, const std::string& name, const OpFn& op, Tolerance tol = {});

// gradcheck of op at the case's inputs, converted to float64.
void check_gradients(const Fixtures& fixtures, const std::string& name, const OpFn& op);

// The inputs of a case (name.in0, name.in1, ...), floating ones requiring grad.
std::vector<Tensor> case_inputs(const Fixtures& fixtures, const std::string& name);

// One fixture case and the ember op that should reproduce it.
struct OpCase {
    std::string name;
    OpFn op;
    bool gradcheck = true; // false where finite differences cannot work (ties, huge inputs)
    Tolerance tol = {};
};

// check_case for every case, each in its own Catch2 section.
void check_cases(const Fixtures& fixtures, const std::vector<OpCase>& cases);

// check_gradients for every case with a floating input and gradcheck = true.
void check_cases_gradients(const Fixtures& fixtures, const std::vector<OpCase>& cases);

// A module fixture case (FixtureFile.module_case): builds the module after
// manual_seed(name.seed) and checks that its parameters equal PyTorch's bit
// for bit; runs it in name.train mode after manual_seed(seed + 1000) on
// name.in0, name.in1, ...; compares the output, the input gradients and
// every parameter's gradient with PyTorch's. Returns the module.
using ModuleBuilder = std::function<std::shared_ptr<nn::Module>()>;
std::shared_ptr<nn::Module> check_module_case(const Fixtures& fixtures, const std::string& name,
                                              const ModuleBuilder& build, Tolerance tol = {});

// A GPT's training against PyTorch's, from the entries tests/fixtures/
// fixture_writer.py's write_training wrote under `name`: forward(idx,
// targets) in training mode after manual_seed(seed + 1000) (PyTorch's
// dropout masks), its logits, loss and every parameter's gradient; then
// `steps` AdamW steps (lr 1e-2) on name.batch0, 1, ... with the next tokens
// as targets after manual_seed(seed + 2000), their losses. seed is
// name.seed; forward is the model's, which nn::Module does not declare.
using GPTForward = std::function<nn::GPTOutput(const Tensor& idx, const Tensor& targets)>;
void check_gpt_training(nn::Module& model, const GPTForward& forward, const Fixtures& fixtures, const std::string& name,
                        int steps);

// The fixtures of a family, loaded once per test program.
const Fixtures& fixtures(const std::string& family);

// How many nodes of each name the graph that computed `root` holds (each
// node counted once): which ops a model's forward really ran.
std::map<std::string, int> graph_op_counts(const Tensor& root);

} // namespace ember::testing
