// Faster copies of the Bernoulli draws behind bernoulli_ and dropout's mask,
// for contiguous tensors, with the draws and the bits of the plain loop in
// core/random/distributions.cpp. Private: that file calls it when the fast
// kernels are on (dispatch.h).
//
// What makes it faster: the generator's words are drawn a block at a time
// (Generator::random_words), not one call per word, and each element is
// set without a branch on its random outcome, which a CPU would mispredict
// as often as it is random. Tests: tests/test_kernels.cpp, and the
// bernoulli_ and dropout cases of tests/test_random.cpp.
#pragma once

#include <cstdint>

#include "core/random/generator.h"

namespace ember::internal {

// data[i] = value where u53_i < threshold, else 0, for i in [0, n), u53_i
// the low 53 bits of the i-th pair of words (the first the high half).
void bernoulli_fill_contiguous(float* data, int64_t n, uint64_t threshold, float value, Generator& gen);
void bernoulli_fill_contiguous(double* data, int64_t n, uint64_t threshold, double value, Generator& gen);
void bernoulli_fill_contiguous(int64_t* data, int64_t n, uint64_t threshold, int64_t value, Generator& gen);
void bernoulli_fill_contiguous(bool* data, int64_t n, uint64_t threshold, bool value, Generator& gen);

// The same draws as bits, for dropout's masks (kernels/dropout.h): bit i of
// words (words[i / 64], bit i % 64) is 1 where u53_i < threshold, for i in
// [0, n).
void bernoulli_bits(uint64_t* words, int64_t n, uint64_t threshold, Generator& gen);

} // namespace ember::internal
