// The Mersenne Twister's loops: see mersenne.h. Tests: tests/test_random.cpp.
#include "core/kernels/mersenne.h"

#include "core/kernels/vectorize.h"

namespace ember::internal {

namespace {

// One step of the twist: the top bit of u joined to the low 31 bits of v,
// shifted right once, and xor-ed with the matrix A when v is odd.
inline uint32_t twist_pair(uint32_t u, uint32_t v) {
    const uint32_t y = (u & 0x80000000u) | (v & 0x7FFFFFFFu);
    return (y >> 1) ^ ((v & 1u) != 0 ? 0x9908B0DFu : 0u);
}

} // namespace

EMBER_VECTOR_CLONES_512
void mt19937_twist(uint32_t* state) {
    constexpr int kN = kMtWords, kM = kMtMiddle;
    // Word i reads word i+1 before the loop reaches it, and (past 227) word
    // i-227, already regenerated: both safe for a vector loop of 16.
    for (int i = 0; i < kN - kM; ++i) state[i] = state[i + kM] ^ twist_pair(state[i], state[i + 1]);
    for (int i = kN - kM; i < kN - 1; ++i) state[i] = state[i + kM - kN] ^ twist_pair(state[i], state[i + 1]);
    state[kN - 1] = state[kM - 1] ^ twist_pair(state[kN - 1], state[0]);
}

EMBER_VECTOR_CLONES_512
void mt19937_temper(const uint32_t* in, uint32_t* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        uint32_t y = in[i];
        y ^= y >> 11;
        y ^= (y << 7) & 0x9D2C5680u;
        y ^= (y << 15) & 0xEFC60000u;
        y ^= y >> 18;
        out[i] = y;
    }
}

} // namespace ember::internal
