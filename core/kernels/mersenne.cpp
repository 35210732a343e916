// The Mersenne Twister's loops, fast (fast::mt19937_twist and _temper,
// dispatch.h): the loops of core/random/mt19937.h themselves, compiled for
// baseline x86-64, AVX2 and AVX-512 (vectorize.h), 8 or 16 words per
// instruction; flatten inlines them into each copy. The same words as the
// generator's own calls of them. Tests: tests/test_kernels.cpp,
// tests/test_random.cpp.
#include "core/random/mt19937.h"

#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"

namespace ember::internal {

[[gnu::flatten]] EMBER_VECTOR_CLONES_512 void fast::mt19937_twist(uint32_t* state) { twist_words(state); }

[[gnu::flatten]] EMBER_VECTOR_CLONES_512 void fast::mt19937_temper(const uint32_t* in, uint32_t* out, int64_t n) {
    temper_words(in, out, n);
}

} // namespace ember::internal
