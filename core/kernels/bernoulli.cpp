// Bernoulli draws, fast: the fill of a contiguous tensor behind bernoulli_
// (fast::bernoulli_fill, dispatch.h) and dropout's mask bits (bernoulli.h),
// with the draws and the bits of the plain loop in
// core/random/distributions.cpp. What makes them faster: the generator's
// words are drawn a block at a time (Generator::random_words), not one call
// per word, and each element is set without a branch on its random outcome,
// which a CPU would mispredict as often as it is random.
// Tests: tests/test_kernels.cpp.
#include "core/kernels/bernoulli.h"

#include <algorithm>

#include "core/kernels/dispatch.h"
#include "core/kernels/vectorize.h"

namespace ember::internal {

namespace {

template <typename T>
void fill(T* data, int64_t n, uint64_t threshold, T value, Generator& gen) {
    constexpr int64_t kBlock = 4096; // words per refill: exactly two per element in all
    uint32_t words[kBlock];
    const uint64_t low53 = (uint64_t{1} << 53) - 1;
    for (int64_t start = 0; start < n; start += kBlock / 2) {
        const int64_t count = std::min(kBlock / 2, n - start);
        gen.random_words(words, 2 * count);
        for (int64_t i = 0; i < count; ++i) {
            // Both below 2^54, u53 - threshold is negative, its top bit set,
            // exactly when u53 < threshold. That bit, 0 or 1, times the value.
            const uint64_t u53 = (uint64_t{words[2 * i]} << 32 | words[2 * i + 1]) & low53;
            data[start + i] = static_cast<T>(static_cast<T>(static_cast<int32_t>((u53 - threshold) >> 63)) * value);
        }
    }
}

} // namespace

EMBER_VECTOR_CLONES_512
void bernoulli_bits(uint64_t* words, int64_t n, uint64_t threshold, Generator& gen) {
    constexpr int64_t kWords = 128; // 64 elements' draws: one word of bits per refill
    uint32_t draws[kWords];
    const uint64_t low53 = (uint64_t{1} << 53) - 1;
    for (int64_t start = 0; start < n; start += 64) {
        const int64_t count = std::min<int64_t>(64, n - start);
        gen.random_words(draws, 2 * count);
        uint64_t bits = 0;
        for (int64_t i = 0; i < count; ++i) {
            const uint64_t u53 = (uint64_t{draws[2 * i]} << 32 | draws[2 * i + 1]) & low53;
            bits |= ((u53 - threshold) >> 63) << i; // 1 exactly when u53 < threshold
        }
        words[start / 64] = bits;
    }
}

template <typename T>
void fast::bernoulli_fill(T* data, int64_t n, uint64_t threshold, T value, Generator& gen) {
    fill(data, n, threshold, value, gen);
}
template void fast::bernoulli_fill(float*, int64_t, uint64_t, float, Generator&);
template void fast::bernoulli_fill(double*, int64_t, uint64_t, double, Generator&);
template void fast::bernoulli_fill(int64_t*, int64_t, uint64_t, int64_t, Generator&);
template void fast::bernoulli_fill(bool*, int64_t, uint64_t, bool, Generator&);

} // namespace ember::internal
