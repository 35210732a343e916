// The Bernoulli draws of dropout's fast masks (kernels/dropout.cpp), as
// bits; the fast fill of bernoulli_ (fast::bernoulli_fill, dispatch.h) is
// beside it in bernoulli.cpp. Private to core/kernels/. Both draw what the
// plain loop of bernoulli_ in core/random/distributions.cpp draws.
// Tests: tests/test_kernels.cpp, and the bernoulli_ and dropout cases of
// tests/test_random.cpp.
#pragma once

#include <cstdint>

#include "core/random/generator.h"

namespace ember::internal {

// Bit i of words (words[i / 64], bit i % 64) is 1 where u53_i < threshold,
// for i in [0, n): u53_i the low 53 bits of the i-th pair of words (the
// first the high half), as bernoulli_ draws one element.
void bernoulli_bits(uint64_t* words, int64_t n, uint64_t threshold, Generator& gen);

} // namespace ember::internal
