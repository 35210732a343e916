// Fast copies of the Mersenne Twister's two loops over its state, whose plain
// twins are in core/random/generator.cpp (Generator::twist, random_words):
// the twist that regenerates the 624 words, and the tempering that turns a
// word into an output. Compiled for baseline x86-64, AVX2 and AVX-512
// (vectorize.h), 8 or 16 words per instruction; integer operations, so the
// same words on every CPU. Private. Tests: tests/test_kernels.cpp, and the
// generator's words against PyTorch's in tests/test_random.cpp.
#pragma once

#include <cstdint>

namespace ember::internal {

inline constexpr int kMtWords = 624;  // the state's words
inline constexpr int kMtMiddle = 397; // the twist's middle distance

// Regenerates the 624 words in place: word i mixes the top bit of word i
// with the low 31 bits of word i+1, shifts right once, xors in the matrix
// 0x9908B0DF when word i+1 is odd, and xors in word i+397 (wrapping around,
// so the last words read words already regenerated).
void mt19937_twist(uint32_t* state);

// out[i] = temper(in[i]) for i in [0, n): a fixed invertible bit mix that
// evens out the word's bits.
void mt19937_temper(const uint32_t* in, uint32_t* out, int64_t n);

} // namespace ember::internal
