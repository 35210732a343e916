// PyTorch's CPU random number generator: the MT19937 engine, seeded as
// torch.manual_seed seeds it, and its state in torch.get_rng_state()'s
// 5056-byte layout. The distributions that turn its words into numbers are
// distributions.cpp (uniform, integers, Bernoulli, exponential), normal.cpp
// and multinomial.cpp. docs/random.md explains each step and how ember
// matches PyTorch to the bit. Tests: tests/test_random.cpp.
#include "core/random/generator.h"

#include <algorithm>
#include <bit>

#include "core/kernels/dispatch.h"
#include "core/random/mt19937.h"
#include "core/tensor/error.h"

namespace ember {

// ---- the MT19937 engine -------------------------------------------------------------

namespace {

constexpr int kN = internal::kMtWords; // state words

// The twist and the tempering of mt19937.h, or their fast copies when the
// fast kernels are on (core/kernels/dispatch.h): the same words.
void twist_state(uint32_t* state) {
    if constexpr (internal::kFastKernelsBuilt) {
        if (internal::use_fast_kernels()) return internal::fast::mt19937_twist(state);
    }
    internal::twist_words(state);
}

void temper_state(const uint32_t* words, uint32_t* out, int64_t n) {
    if constexpr (internal::kFastKernelsBuilt) {
        if (internal::use_fast_kernels()) return internal::fast::mt19937_temper(words, out, n);
    }
    internal::temper_words(words, out, n);
}

} // namespace

Generator::Generator(uint64_t seed) { manual_seed(seed); }

Generator::Generator(const Generator& other) { *this = other; }

Generator& Generator::operator=(const Generator& other) {
    if (this == &other) return *this;
    std::scoped_lock lock(mutex_, other.mutex_);
    initial_seed_ = other.initial_seed_;
    state_ = other.state_;
    left_ = other.left_;
    next_ = other.next_;
    next_double_normal = other.next_double_normal;
    return *this;
}

void Generator::manual_seed(uint64_t seed) {
    std::lock_guard lock(mutex_);
    // Matsumoto and Nishimura's init_genrand on the low 32 bits:
    //   x[0] = s mod 2^32,  x[j] = 1812433253 * (x[j-1] ^ (x[j-1] >> 30)) + j  (mod 2^32).
    // All 64 bits are remembered, so seeds s and s + 2^32 give the same stream.
    initial_seed_ = seed;
    state_[0] = static_cast<uint32_t>(seed);
    for (int j = 1; j < kN; ++j)
        state_[j] = 1812433253u * (state_[j - 1] ^ (state_[j - 1] >> 30)) + static_cast<uint32_t>(j);
    left_ = 1; // the first draw twists
    next_ = 0;
    next_double_normal.reset();
}

void Generator::twist() {
    // Regenerates all 624 words in place (mt19937.h).
    twist_state(state_.data());
    left_ = kN;
    next_ = 0;
}

uint32_t Generator::random() {
    if (--left_ == 0) twist();
    return internal::temper(state_[next_++]);
}

void Generator::random_words(uint32_t* out, int64_t n) {
    // random() reads left_ - 1 words before its next twist. The draw that
    // twists reads state_[0] and leaves left_ at kN, as if left_ had been
    // kN + 1 before it.
    while (n > 0) {
        if (left_ == 1) {
            twist();
            left_ = kN + 1;
        }
        const int64_t take = std::min<int64_t>(n, left_ - 1);
        const uint32_t* words = state_.data() + next_;
        temper_state(words, out, take);
        out += take;
        n -= take;
        next_ += static_cast<uint32_t>(take);
        left_ -= static_cast<int32_t>(take);
    }
}

uint64_t Generator::random64() {
    uint64_t hi = random(); // the first word is the high half
    uint64_t lo = random();
    return (hi << 32) | lo;
}

// u24 = (r32 & 0xFFFFFF) * 2^-24: 24 random bits fill a float's mantissa exactly.
float Generator::uniform_float() { return static_cast<float>(random() & 0xFFFFFFu) * 0x1p-24f; }

// u53 = (r64 & (2^53 - 1)) * 2^-53: the low 53 bits of the 64.
double Generator::uniform_double() { return static_cast<double>(random64() & ((uint64_t{1} << 53) - 1)) * 0x1p-53; }

// ---- get_state / set_state: torch.get_rng_state()'s bytes -----------------------------
//
// Little-endian, by byte offset: 0 initial seed (u64), 8 left (i32), 12 seeded
// (i32), 16 next (u64), 24 the 624 state words (each as a u64), 5016/5024/5032
// three doubles of the legacy normal cache (5024 holds the cached sample), 5040
// its valid flag (i32), 5044 a float cache and 5048 its flag, never used on the
// CPU; zero padding to 5056. The older 5048-byte layout stops after 5040.

namespace {

constexpr size_t kStateBytes = 5056;
constexpr size_t kLegacyStateBytes = 5048;

void put_bytes(std::vector<uint8_t>& out, size_t at, uint64_t value, int count) {
    for (int i = 0; i < count; ++i) out[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t get_bytes(const std::vector<uint8_t>& in, size_t at, int count) {
    uint64_t value = 0;
    for (int i = 0; i < count; ++i) value |= static_cast<uint64_t>(in[at + i]) << (8 * i);
    return value;
}

} // namespace

std::vector<uint8_t> Generator::get_state() const {
    std::lock_guard lock(mutex_);
    std::vector<uint8_t> out(kStateBytes, 0);
    put_bytes(out, 0, initial_seed_, 8);
    put_bytes(out, 8, static_cast<uint32_t>(left_), 4);
    put_bytes(out, 12, 1, 4); // seeded: always, since construction seeds
    put_bytes(out, 16, next_, 8);
    for (int i = 0; i < kN; ++i) put_bytes(out, 24 + 8 * i, state_[i], 8);
    if (next_double_normal) {
        put_bytes(out, 5024, std::bit_cast<uint64_t>(*next_double_normal), 8);
        put_bytes(out, 5040, 1, 4);
    }
    return out;
}

void Generator::set_state(const std::vector<uint8_t>& state) {
    if (state.size() != kStateBytes && state.size() != kLegacyStateBytes)
        fail<ValueError>("Generator::set_state", "expected the ", kStateBytes,
                         "-byte layout of torch.get_rng_state() (or the ", kLegacyStateBytes, "-byte legacy one), got ",
                         state.size(), " bytes");
    auto left = static_cast<int32_t>(get_bytes(state, 8, 4));
    auto seeded = static_cast<int32_t>(get_bytes(state, 12, 4));
    uint64_t next = get_bytes(state, 16, 8);
    // A draw reads state_[next] .. state_[next + left - 2] before it twists,
    // so those must stay inside the 624 words (PyTorch checks a little less).
    if (seeded != 1 || left < 1 || left > kN || next > kN || next + static_cast<uint64_t>(left) > kN + 1)
        fail<ValueError>("Generator::set_state", "invalid MT19937 state: seeded=", seeded, ", left=", left,
                         ", next=", next, " (need seeded=1, 1 <= left <= 624, next + left <= 625)");
    for (int i = 0; i < kN; ++i) {
        uint64_t word = get_bytes(state, 24 + 8 * i, 8);
        if (word > 0xFFFFFFFFu)
            fail<ValueError>("Generator::set_state", "state word ", i, " is ", word, ", which does not fit in 32 bits");
    }
    std::lock_guard lock(mutex_);
    initial_seed_ = get_bytes(state, 0, 8);
    for (int i = 0; i < kN; ++i) state_[i] = static_cast<uint32_t>(get_bytes(state, 24 + 8 * i, 8));
    left_ = left;
    next_ = static_cast<uint32_t>(next);
    next_double_normal.reset();
    if (get_bytes(state, 5040, 4) != 0) next_double_normal = std::bit_cast<double>(get_bytes(state, 5024, 8));
}

Generator& default_generator() {
    static Generator generator;
    return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

} // namespace ember
