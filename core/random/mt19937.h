// The Mersenne Twister's two loops over its state: the twist that
// regenerates the 624 words, and the tempering that turns a word into an
// output. Included by the generator (generator.cpp) and by their fast copy
// (core/kernels/mersenne.cpp), which compiles these same loops for AVX2 and
// AVX-512, so the two are one source. Integer operations: the same words on
// every CPU. Private. Tests: tests/test_random.cpp, tests/test_kernels.cpp.
#pragma once

#include <cstdint>

namespace ember::internal {

inline constexpr int kMtWords = 624;  // the state's words
inline constexpr int kMtMiddle = 397; // the twist's middle distance

// One step of the twist: the top bit of u joined to the low 31 bits of v,
// shifted right once, and xor-ed with the matrix A when v is odd.
inline uint32_t twist_pair(uint32_t u, uint32_t v) {
    const uint32_t y = (u & 0x80000000u) | (v & 0x7FFFFFFFu);
    return (y >> 1) ^ ((v & 1u) != 0 ? 0x9908B0DFu : 0u);
}

// Regenerates the 624 words in place: word i mixes words i and i+1 and xors
// in word i+397, wrapping around, so the last words read words already
// regenerated. (Word i reads word i+1 before the loop reaches it, and past
// 227 word i-227, already regenerated: both safe for a vector loop of 16.)
inline void twist_words(uint32_t* state) {
    constexpr int kN = kMtWords, kM = kMtMiddle;
    for (int i = 0; i < kN - kM; ++i) state[i] = state[i + kM] ^ twist_pair(state[i], state[i + 1]);
    for (int i = kN - kM; i < kN - 1; ++i) state[i] = state[i + kM - kN] ^ twist_pair(state[i], state[i + 1]);
    state[kN - 1] = state[kM - 1] ^ twist_pair(state[kN - 1], state[0]);
}

// Tempering: a fixed invertible bit mix that evens out the word's bits.
inline uint32_t temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9D2C5680u;
    y ^= (y << 15) & 0xEFC60000u;
    y ^= y >> 18;
    return y;
}

// out[i] = temper(in[i]) for i in [0, n).
inline void temper_words(const uint32_t* in, uint32_t* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = temper(in[i]);
}

} // namespace ember::internal
