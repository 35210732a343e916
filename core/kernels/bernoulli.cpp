// The Bernoulli fill, fast: see bernoulli.h. Tests: tests/test_kernels.cpp.
#include "core/kernels/bernoulli.h"

#include <algorithm>

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

void bernoulli_fill_contiguous(float* data, int64_t n, uint64_t threshold, float value, Generator& gen) {
    fill(data, n, threshold, value, gen);
}
void bernoulli_fill_contiguous(double* data, int64_t n, uint64_t threshold, double value, Generator& gen) {
    fill(data, n, threshold, value, gen);
}
void bernoulli_fill_contiguous(int64_t* data, int64_t n, uint64_t threshold, int64_t value, Generator& gen) {
    fill(data, n, threshold, value, gen);
}
void bernoulli_fill_contiguous(bool* data, int64_t n, uint64_t threshold, bool value, Generator& gen) {
    fill(data, n, threshold, value, gen);
}

} // namespace ember::internal
