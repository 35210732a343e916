// PyTorch's CPU generator, and the distributions that use one draw per element.
//
// The engine is MT19937 seeded as torch.manual_seed seeds it; get_state and
// set_state use torch.get_rng_state()'s 5056-byte layout. On top of it: rand
// and uniform_, randint, bernoulli_ and bernoulli, exponential_, each turning
// words into numbers exactly as PyTorch 1.13's x86 AVX2 build does (uniform_
// is a fused multiply-add there). The normal paths live in normal.cpp,
// multinomial in multinomial.cpp. Not covered: MKL and the non-AVX2 kernels.
// Spec: /work/shared/spec/torch_rng.md; docs/random.md. Tests: tests/test_random.cpp.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "autograd.h"
#include "ops.h"
#include "random_internal.h"
#include "shape.h"

namespace ember {

using namespace internal;

// ---- the MT19937 engine -------------------------------------------------------------

namespace {

constexpr int kN = 624; // state words
constexpr int kM = 397; // the twist's middle distance

// One step of the twist: the top bit of u joined to the low 31 bits of v,
// shifted right once, and xor-ed with the matrix A when v is odd.
uint32_t twist_pair(uint32_t u, uint32_t v) {
    uint32_t y = (u & 0x80000000u) | (v & 0x7FFFFFFFu);
    return (y >> 1) ^ ((v & 1u) != 0 ? 0x9908B0DFu : 0u);
}

} // namespace

Generator::Generator(uint64_t seed) { manual_seed(seed); }

void Generator::manual_seed(uint64_t seed) {
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
    // Regenerates all 624 words in place: word i mixes words i and i+1 and
    // xors in word i+397 (wrapping around, so the last words read new values).
    for (int i = 0; i < kN - kM; ++i) state_[i] = state_[i + kM] ^ twist_pair(state_[i], state_[i + 1]);
    for (int i = kN - kM; i < kN - 1; ++i) state_[i] = state_[i + kM - kN] ^ twist_pair(state_[i], state_[i + 1]);
    state_[kN - 1] = state_[kM - 1] ^ twist_pair(state_[kN - 1], state_[0]);
    left_ = kN;
    next_ = 0;
}

// Tempering: a fixed invertible bit mix that evens out the word's bits.
static inline uint32_t temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9D2C5680u;
    y ^= (y << 15) & 0xEFC60000u;
    y ^= y >> 18;
    return y;
}

uint32_t Generator::random() {
    if (--left_ == 0) twist();
    return temper(state_[next_++]);
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
        for (int64_t i = 0; i < take; ++i) out[i] = temper(words[i]); // vectorises
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
double Generator::uniform_double() {
    return static_cast<double>(random64() & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
}

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
        fail<ValueError>("Generator::set_state", "expected the ", kStateBytes, "-byte layout of torch.get_rng_state() (or the ",
                         kLegacyStateBytes, "-byte legacy one), got ", state.size(), " bytes");
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

// ---- helpers shared by the fills (random_internal.h) -------------------------------------

namespace internal {

Shape memory_order(const Tensor& t) {
    Shape order(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.strides()[a] > t.strides()[b]; });
    return order;
}

bool is_non_overlapping_and_dense(const Tensor& t) {
    // Walk the dims from the smallest stride up: each dim of size > 1 must
    // step exactly over the block the faster dims cover.
    Shape order = memory_order(t);
    int64_t expected = 1;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        int64_t size = t.shape()[*it];
        if (size == 1) continue;
        if (size == 0) return true;
        if (t.strides()[*it] != expected) return false;
        expected *= size;
    }
    return true;
}

Tensor empty_preserving_layout(const Tensor& like, DType dtype) {
    if (like.is_contiguous() || !is_non_overlapping_and_dense(like)) return empty(like.shape(), dtype);
    // A dense permuted layout: strides as like's, over a fresh buffer that
    // starts at the lowest address (offset 0).
    auto impl = std::make_shared<TensorImpl>();
    impl->dtype = dtype;
    impl->shape = like.shape();
    impl->strides = like.strides();
    impl->storage = std::make_shared<Storage>(static_cast<size_t>(like.numel()) * element_size(dtype));
    return Tensor(std::move(impl));
}

void check_fill_target(const Tensor& t, const char* op) {
    check_inplace(t, op, t.requires_grad());
    check_writable(t, op);
}

void finish_fill(const Tensor& t, const char* grad_name) {
    bump_version(t);
    record_overwrite(t, grad_name);
}

} // namespace internal

// ---- uniform: rand, uniform_ ---------------------------------------------------------------

namespace {

// The dtype check every float-only fill starts with.
void require_floating(const Tensor& t, const char* op) {
    if (!t.is_floating_point())
        fail<DTypeError>(op, "needs a float32 or float64 tensor, got ", dtype_name(t.dtype()), " of shape ", t.shape());
}

// The largest finite value of a floating dtype.
double dtype_max(DType dtype) {
    return dtype == kFloat32 ? static_cast<double>(std::numeric_limits<float>::max())
                             : std::numeric_limits<double>::max();
}

} // namespace

Tensor& Tensor::uniform_(double from, double to, Generator* generator) {
    check_fill_target(*this, "uniform_");
    require_floating(*this, "uniform_");
    const double max = dtype_max(dtype());
    if (!(from >= -max && from <= max))
        fail<ValueError>("uniform_", "from=", from, " is not a finite ", dtype_name(dtype()), " (tensor of shape ",
                         shape(), ")");
    if (!(to >= -max && to <= max))
        fail<ValueError>("uniform_", "to=", to, " is not a finite ", dtype_name(dtype()), " (tensor of shape ",
                         shape(), ")");
    if (from > to)
        fail<ValueError>("uniform_", "expects a range [from, to) with from <= to, got from=", from, " > to=", to,
                         " (tensor of shape ", shape(), ")");
    if (to - from > max)
        fail<ValueError>("uniform_", "to - from = ", to - from, " exceeds the largest ", dtype_name(dtype()),
                         " (from=", from, ", to=", to, ", tensor of shape ", shape(), ")");
    Generator& gen = generator_or_default(generator);
    // x = u24 (float32) or u53 (float64), then x * (to - from) + from in the
    // tensor's dtype with one rounding: PyTorch's AVX2 build compiles this
    // expression to a fused multiply-add. For [0, 1) it is exactly x.
    if (dtype() == kFloat32) {
        const float lo = static_cast<float>(from), width = static_cast<float>(to) - lo;
        for_each_in_memory_order<float>(*this, [&](float& x) { x = std::fmaf(gen.uniform_float(), width, lo); });
    } else {
        const double width = to - from;
        for_each_in_memory_order<double>(*this, [&](double& x) { x = std::fma(gen.uniform_double(), width, from); });
    }
    finish_fill(*this, "UniformBackward0");
    return *this;
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* generator) {
    check_sizes(shape, "rand");
    DType dtype = options.dtype_or(kFloat32);
    if (!is_floating(dtype))
        fail<DTypeError>("rand", "makes float32 or float64 tensors, asked for ", dtype_name(dtype), " of shape ", shape);
    Tensor out = empty(shape, dtype);
    out.uniform_(0.0, 1.0, generator);
    if (options.requires_grad()) out.requires_grad_(true);
    return out;
}

Tensor rand_like(const Tensor& other, Generator* generator) {
    if (!other.is_floating_point())
        fail<DTypeError>("rand_like", "makes float32 or float64 tensors, got a ", dtype_name(other.dtype()),
                         " tensor of shape ", other.shape());
    Tensor out = empty_preserving_layout(other, other.dtype());
    out.uniform_(0.0, 1.0, generator);
    return out;
}

// ---- randint: random_(low, high) --------------------------------------------------------------

namespace {

// PyTorch's update_from / update_to for a floating output: when low + 1 (or
// high - 1) is not representable in T it rounds, possibly outside [low, high);
// these move the bounds inward to the next values that stay inside after the
// cast. Only matters beyond 2^24 (float32) or 2^53 (float64).
template <typename T>
int64_t update_from(int64_t from) {
    const int64_t from_plus_1 = cast_value<int64_t>(static_cast<T>(from + 1));
    if (from_plus_1 < from) {
        int64_t magnitude = from + 1 < 0 ? -(from + 1) : from + 1;
        int n = 0;
        while (magnitude >>= 1) ++n;
        from = from_plus_1 + (int64_t{1} << (n - std::numeric_limits<T>::digits + 1));
    }
    return from;
}

template <typename T>
int64_t update_to(int64_t to) {
    const int64_t to_minus_1 = cast_value<int64_t>(static_cast<T>(to - 1));
    if (to_minus_1 >= to) {
        int64_t magnitude = to - 1 < 0 ? -(to - 1) : to - 1;
        int n = 0;
        while (magnitude >>= 1) ++n;
        to = to_minus_1 - (int64_t{1} << (n - std::numeric_limits<T>::digits + 1));
    }
    return to;
}

} // namespace

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options, Generator* generator) {
    check_sizes(shape, "randint");
    const DType dtype = options.dtype_or(kInt64);
    if (low >= high)
        fail<ValueError>("randint", "low must be less than high, got low=", low, " >= high=", high,
                         " for a tensor of shape ", shape);
    int64_t from = low, to = high;
    if (dtype == kFloat32 || dtype == kFloat64) {
        from = dtype == kFloat32 ? update_from<float>(from) : update_from<double>(from);
        to = dtype == kFloat32 ? update_to<float>(to) : update_to<double>(to);
        if (from >= to)
            fail<ValueError>("randint", "no ", dtype_name(dtype), " integer lies in [low, high) once rounded: low=", low,
                             ", high=", high, " (shape ", shape, ")");
    } else if (dtype == kBool) {
        if (from < 0 || from > 1 || to - 1 > 1)
            fail<ValueError>("randint", "bool values are 0 or 1, so [low, high) must lie in [0, 2), got low=", low,
                             ", high=", high, " (shape ", shape, ")");
    }
    if (options.requires_grad() && !is_floating(dtype))
        fail<DTypeError>("randint", "only floating point tensors can require grad, asked for ", dtype_name(dtype),
                         " of shape ", shape);
    // value = (r mod range) + low in uint64 arithmetic: plain modulo, with
    // its small bias, as PyTorch. One 32-bit word per element when the range
    // fits in 32 bits, else one 64-bit draw (bool always takes 32).
    const uint64_t range = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
    const bool wide = range >= (uint64_t{1} << 32) && dtype != kBool;
    Generator& gen = generator_or_default(generator);
    Tensor out = empty(shape, dtype);
    dispatch(dtype, [&]<typename T>(TypeTag<T>) {
        for_each_in_memory_order<T>(out, [&](T& x) {
            uint64_t r = wide ? gen.random64() : gen.random();
            x = static_cast<T>(static_cast<int64_t>(r % range + static_cast<uint64_t>(from)));
        });
    });
    if (options.requires_grad()) out.requires_grad_(true);
    return out;
}

Tensor randint(int64_t high, const Shape& shape, TensorOptions options, Generator* generator) {
    return randint(0, high, shape, options, generator);
}

// ---- Bernoulli: bernoulli_(p), bernoulli(p tensor), dropout's mask ------------------------------

void internal::bernoulli_fill(Tensor& t, double p, double kept, Generator& gen) {
    // One u53 per element (two words, the first the high half), a success
    // when u53 * 2^-53 < p. Scaling by 2^53 is exact, so that is the integer
    // test u53 < ceil(p * 2^53): the same outcome without a conversion.
    const uint64_t threshold = static_cast<uint64_t>(std::ceil(p * 0x1p53));
    const uint64_t low53 = (uint64_t{1} << 53) - 1;
    // Words are drawn a block at a time, exactly two per element in all.
    constexpr int64_t kBlock = 4096;
    uint32_t words[kBlock];
    dispatch(t.dtype(), [&]<typename T>(TypeTag<T>) {
        const T value = static_cast<T>(kept);
        // The element drawn from words w[0], w[1], without a branch on the
        // outcome (a CPU would mispredict it as often as it is random): both
        // below 2^54, u53 - threshold is negative, its top bit set, exactly
        // when u53 < threshold. That bit, 0 or 1, times the kept value.
        auto draw = [&](const uint32_t* w) {
            const uint64_t u53 = (uint64_t{w[0]} << 32 | w[1]) & low53;
            return static_cast<T>(static_cast<T>(static_cast<int32_t>((u53 - threshold) >> 63)) * value);
        };
        if (t.is_contiguous()) {
            // The common case (dropout's mask): whole blocks, with no test
            // for a refill on every element.
            T* data = t.data_ptr<T>();
            for (int64_t start = 0; start < t.numel(); start += kBlock / 2) {
                const int64_t count = std::min(kBlock / 2, t.numel() - start);
                gen.random_words(words, 2 * count);
                for (int64_t i = 0; i < count; ++i) data[start + i] = draw(words + 2 * i);
            }
            return;
        }
        int64_t left = 2 * t.numel(), have = 0, at = 0;
        for_each_in_memory_order<T>(t, [&](T& x) {
            if (at == have) {
                have = std::min(left, kBlock);
                gen.random_words(words, have);
                left -= have;
                at = 0;
            }
            x = draw(words + at);
            at += 2;
        });
    });
}

Tensor& Tensor::bernoulli_(double p, Generator* generator) {
    check_fill_target(*this, "bernoulli_");
    if (!(p >= 0.0 && p <= 1.0))
        fail<ValueError>("bernoulli_", "p must be in [0, 1], got p=", p, " (tensor of shape ", shape(), ")");
    bernoulli_fill(*this, p, 1.0, generator_or_default(generator));
    finish_fill(*this, "BernoulliBackward1");
    return *this;
}

Tensor bernoulli(const Tensor& p, Generator* generator) {
    if (!p.is_floating_point())
        fail<DTypeError>("bernoulli", "probabilities must be float32 or float64, got ", dtype_name(p.dtype()),
                         " of shape ", p.shape());
    Tensor probs = contiguous_data(p);
    Tensor out = empty(p.shape(), p.dtype()); // contiguous, as PyTorch's
    dispatch_floating(p.dtype(), "bernoulli", [&]<typename T>(TypeTag<T>) {
        const T* pp = probs.data_ptr<T>();
        for (int64_t i = 0; i < probs.numel(); ++i)
            if (!(pp[i] >= 0 && pp[i] <= 1))
                fail<ValueError>("bernoulli", "probabilities must be in [0, 1], found ", pp[i], " at flat index ", i,
                                 " of p of shape ", p.shape());
        // Draws in the output's (row-major) order. A float32 p compares a
        // float32 u24 (one 32-bit word), a float64 p a u53 (two words).
        Generator& gen = generator_or_default(generator);
        T* po = out.data_ptr<T>();
        for (int64_t i = 0; i < out.numel(); ++i) {
            T u;
            if constexpr (std::is_same_v<T, float>) u = gen.uniform_float();
            else u = gen.uniform_double();
            po[i] = u < pp[i] ? T(1) : T(0);
        }
    });
    return out;
}

// ---- exponential_ ---------------------------------------------------------------------------

Tensor& Tensor::exponential_(double lambd, Generator* generator) {
    check_fill_target(*this, "exponential_");
    require_floating(*this, "exponential_");
    if (!(lambd >= 0.0))
        fail<ValueError>("exponential_", "lambda must be >= 0, got lambda=", lambd, " (tensor of shape ", shape(), ")");
    Generator& gen = generator_or_default(generator);
    // Inversion: x = -(1/lambda) * log(1 - u53), in double with the factor
    // formed first, then rounded to the tensor's dtype.
    const double scale = -1.0 / lambd;
    dispatch_floating(dtype(), "exponential_", [&]<typename T>(TypeTag<T>) {
        for_each_in_memory_order<T>(*this, [&](T& x) { x = static_cast<T>(scale * std::log(1.0 - gen.uniform_double())); });
    });
    finish_fill(*this, "ExponentialBackward0");
    return *this;
}

} // namespace ember
