// The distributions that take one or two draws per element: rand and
// uniform_, randint, bernoulli_ and bernoulli (and dropout's mask),
// exponential_. Each turns the generator's words into numbers exactly as
// PyTorch 1.13's x86 AVX2 build does (uniform_ is a fused multiply-add
// there); normal.cpp and multinomial.cpp hold the others. Not covered: MKL
// and the non-AVX2 kernels. docs/random.md explains each; tests:
// tests/test_random.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/loops/arithmetic.h"
#include "core/ops/ops.h"
#include "core/random/fill.h"
#include "core/tensor/platform.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::bernoulli_threshold;
using internal::cast_value;
using internal::check_fill_target;
using internal::check_floating;
using internal::contiguous_data;
using internal::finish_fill;
using internal::for_each_in_memory_order;
using internal::generator_or_default;
using internal::kFastKernelsBuilt;
using internal::random_tensor;
using internal::random_tensor_like;
using internal::use_fast_kernels;
namespace fast = internal::fast;
using internal::fma_double;
using internal::fma_float;

// ---- uniform: rand, uniform_ ---------------------------------------------------------------

namespace {

// The largest finite value of a floating dtype.
double dtype_max(DType dtype) {
    return dtype == kFloat32 ? static_cast<double>(std::numeric_limits<float>::max())
                             : std::numeric_limits<double>::max();
}

} // namespace

Tensor& Tensor::uniform_(double from, double to, Generator* generator) {
    check_fill_target(*this, "uniform_");
    check_floating(*this, "uniform_");
    const double max = dtype_max(dtype());
    if (!(from >= -max && from <= max))
        fail<ValueError>("uniform_", "from=", from, " is not a finite ", dtype_name(dtype()), " (tensor of shape ",
                         shape(), ")");
    if (!(to >= -max && to <= max))
        fail<ValueError>("uniform_", "to=", to, " is not a finite ", dtype_name(dtype()), " (tensor of shape ", shape(),
                         ")");
    if (from > to)
        fail<ValueError>("uniform_", "expects a range [from, to) with from <= to, got from=", from, " > to=", to,
                         " (tensor of shape ", shape(), ")");
    if (to - from > max)
        fail<ValueError>("uniform_", "to - from = ", to - from, " exceeds the largest ", dtype_name(dtype()),
                         " (from=", from, ", to=", to, ", tensor of shape ", shape(), ")");
    Generator& gen = generator_or_default(generator);
    std::lock_guard lock(gen.mutex()); // this op's draws: one run of the stream
    // x = u24 (float32) or u53 (float64), then x * (to - from) + from in the
    // tensor's dtype with one rounding: PyTorch's AVX2 build compiles this
    // expression to a fused multiply-add. For [0, 1) it is exactly x.
    if (dtype() == kFloat32) {
        const float lo = static_cast<float>(from), width = static_cast<float>(to) - lo;
        for_each_in_memory_order<float>(*this, [&](float& x) { x = fma_float(gen.uniform_float(), width, lo); });
    } else {
        const double width = to - from;
        for_each_in_memory_order<double>(*this, [&](double& x) { x = fma_double(gen.uniform_double(), width, from); });
    }
    finish_fill(*this, "UniformBackward0");
    return *this;
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* generator) {
    return random_tensor("rand", shape, options, [&](Tensor& out) { out.uniform_(0.0, 1.0, generator); });
}

Tensor rand_like(const Tensor& other, Generator* generator) {
    return random_tensor_like("rand_like", other, [&](Tensor& out) { out.uniform_(0.0, 1.0, generator); });
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
            fail<ValueError>("randint", "no ", dtype_name(dtype),
                             " integer lies in [low, high) once rounded: low=", low, ", high=", high, " (shape ", shape,
                             ")");
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
    std::lock_guard lock(gen.mutex()); // this op's draws: one run of the stream
    Tensor out = internal::empty_for("randint", shape, dtype);
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

// ---- Bernoulli: bernoulli_(p), bernoulli(p tensor) ------------------------------------------------

Tensor& Tensor::bernoulli_(double p, Generator* generator) {
    check_fill_target(*this, "bernoulli_");
    if (!(p >= 0.0 && p <= 1.0))
        fail<ValueError>("bernoulli_", "p must be in [0, 1], got p=", p, " (tensor of shape ", shape(), ")");
    const uint64_t threshold = bernoulli_threshold(p);
    Generator& gen = generator_or_default(generator);
    std::lock_guard lock(gen.mutex()); // this op's draws: one run of the stream
    dispatch(dtype(), [&]<typename T>(TypeTag<T>) {
        if constexpr (kFastKernelsBuilt) {
            if (is_contiguous() && use_fast_kernels())
                return fast::bernoulli_fill(data_ptr<T>(), numel(), threshold, T(1), gen);
        }
        const uint64_t low53 = (uint64_t{1} << 53) - 1;
        for_each_in_memory_order<T>(*this, [&](T& x) { x = (gen.random64() & low53) < threshold ? T(1) : T(0); });
    });
    finish_fill(*this, "BernoulliBackward1");
    return *this;
}

Tensor bernoulli(const Tensor& p, Generator* generator) {
    check_floating(p, "bernoulli", "the probabilities");
    Tensor probs = contiguous_data(p);
    Tensor out = internal::empty_for("bernoulli", p.shape(), p.dtype()); // contiguous, as PyTorch's
    dispatch_floating(p.dtype(), "bernoulli", [&]<typename T>(TypeTag<T>) {
        const T* pp = probs.data_ptr<T>();
        for (int64_t i = 0; i < probs.numel(); ++i)
            if (!(pp[i] >= 0 && pp[i] <= 1))
                fail<ValueError>("bernoulli", "probabilities must be in [0, 1], found ", pp[i], " at flat index ", i,
                                 " of p of shape ", p.shape());
        // Draws in the output's (row-major) order. A float32 p compares a
        // float32 u24 (one 32-bit word), a float64 p a u53 (two words).
        Generator& gen = generator_or_default(generator);
        std::lock_guard lock(gen.mutex()); // this op's draws: one run of the stream
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
    check_floating(*this, "exponential_");
    if (!(lambd >= 0.0))
        fail<ValueError>("exponential_", "lambda must be >= 0, got lambda=", lambd, " (tensor of shape ", shape(), ")");
    Generator& gen = generator_or_default(generator);
    std::lock_guard lock(gen.mutex()); // this op's draws: one run of the stream
    // Inversion: x = -(1/lambda) * log(1 - u53), in double with the factor
    // formed first, then rounded to the tensor's dtype.
    const double scale = -1.0 / lambd;
    dispatch_floating(dtype(), "exponential_", [&]<typename T>(TypeTag<T>) {
        for_each_in_memory_order<T>(*this,
                                    [&](T& x) { x = static_cast<T>(scale * std::log(1.0 - gen.uniform_double())); });
    });
    finish_fill(*this, "ExponentialBackward0");
    return *this;
}

} // namespace ember
