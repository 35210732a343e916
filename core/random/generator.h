// PyTorch's CPU random number generator, bit for bit: a Generator is an
// MT19937 engine seeded as torch.manual_seed seeds it, plus the cached second
// sample of the scalar Box-Muller path. The distributions (distributions.cpp,
// normal.cpp, multinomial.cpp) turn its words into numbers exactly as PyTorch
// 1.13 does on an x86 CPU with AVX2, so the same seed gives the same tensors.
// docs/random.md gives every rule and how it was checked against PyTorch.
// Tests: tests/test_random.cpp (values printed by torch, to every bit).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace ember {

class Generator {
public:
    // PyTorch's default CPU seed, used until manual_seed is called.
    static constexpr uint64_t kDefaultSeed = 67280421310721ULL;

    explicit Generator(uint64_t seed = kDefaultSeed);
    // A copy continues the same stream independently (with a lock of its own).
    Generator(const Generator& other);
    Generator& operator=(const Generator& other);

    // Seeds the engine from the low 32 bits of `seed` (all 64 are remembered
    // as initial_seed) and clears the cached normal sample. A negative seed
    // converts to its two's complement, as in PyTorch.
    void manual_seed(uint64_t seed);
    uint64_t initial_seed() const { return initial_seed_; }

    // The next tempered 32-bit word.
    uint32_t random();
    // Two words, the first one as the high half.
    uint64_t random64();
    // The next n words into out: the same words, and the same state after,
    // as n calls of random(), a block at a time (the fast path of fills).
    void random_words(uint32_t* out, int64_t n);

    // Uniform floats from one draw: (r32 & 0xFFFFFF) * 2^-24 and
    // (r64 & (2^53 - 1)) * 2^-53, as PyTorch's uniform kernels make them.
    float uniform_float();
    double uniform_double();

    // The scalar Box-Muller path's cached sine half (see normal.cpp). Only
    // manual_seed (and set_state) clear or set it; the 16-wide path leaves it.
    std::optional<double> next_double_normal;

    // The state as torch.get_rng_state() lays it out (5056 bytes), so a
    // checkpoint can save it and a resumed run continue the same stream.
    // set_state also takes torch's older 5048-byte layout, and throws a
    // ValueError for any other size or an impossible engine position.
    std::vector<uint8_t> get_state() const;
    void set_state(const std::vector<uint8_t>& state);

    // Threads may share a Generator, as PyTorch's CPU generator: every random
    // op (rand, randn, dropout, multinomial, ...) holds this lock while it
    // draws, so each op's draws are one unbroken run of the stream and no word
    // is drawn twice. Which thread's op gets which run is up to the scheduler;
    // one seed on one thread still gives the same numbers. manual_seed,
    // get_state and set_state take it too. The drawing methods above do not:
    // code that calls them from several threads holds mutex() around them.
    // Recursive, so an op may call another op on the same generator.
    std::recursive_mutex& mutex() const { return mutex_; }

private:
    void twist();

    // PyTorch's mt19937 bookkeeping, kept as it is so get_state writes the
    // same bytes: a draw first decrements left_ and twists when it reaches 0,
    // then tempers state_[next_++]. Seeding sets left_ = 1, next_ = 0.
    uint64_t initial_seed_ = 0;
    std::array<uint32_t, 624> state_{};
    int32_t left_ = 1;
    uint32_t next_ = 0;
    mutable std::recursive_mutex mutex_;
};

// The generator every random op uses unless given another one.
Generator& default_generator();

// torch.manual_seed: reseeds the default generator.
void manual_seed(uint64_t seed);

} // namespace ember
