// Normal samples bit-identical to PyTorch 1.13's x86 AVX2 build: randn,
// randn_like and Tensor::normal_, by PyTorch's two Box-Muller paths (below).
// Not covered: the non-AVX2 kernels (unfused libm float path) and MKL.
// docs/random.md ("Normal") walks through both paths with a worked example.
// Tests: tests/test_random.cpp.
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/ops/ops.h"
#include "core/random/fill.h"
#include "core/tensor/platform.h"
#include "core/tensor/shape.h"

// The two paths, chosen as PyTorch chooses them:
//  * contiguous tensors of 16 or more elements: the 16-wide fill. float32
//    runs avx_mathfun's Cephes log and sincos, reproduced here with plain
//    float arithmetic and a fused multiply-add (fma_float, std::fmaf but on
//    Windows: core/tensor/platform.h) exactly where GCC fused the vector code;
//    float64 runs glibc log/sin/cos.
//  * everything else: a scalar double Box-Muller that caches its second
//    sample in the Generator, in memory order.

namespace ember {

using internal::check_fill_target;
using internal::check_floating;
using internal::data_of;
using internal::finish_fill;
using internal::fma_double;
using internal::fma_float;
using internal::for_each_in_memory_order;
using internal::generator_or_default;
using internal::random_tensor;
using internal::random_tensor_like;

namespace {

// ---- float32 log(x) as avx_mathfun's log256_ps computes it ---------------------------------
//
// Cephes logf: write x = m * 2^e with m in [sqrt(1/2), sqrt(2)), t = m - 1,
// log x = t - t^2/2 + t^3 * P(t) + e * log 2, with log 2 split in two parts
// (Q2 exact in a few bits, Q1 the small rest) so e * Q2 is exact. Every step
// rounds to float32; "fma" marks one rounding for a*b+c.

constexpr float kLogP[9] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                            -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                            2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};
constexpr float kLogQ1 = -2.12194440e-4f;
constexpr float kLogQ2 = 0.693359375f;
constexpr float kSqrtHalf = 0.707106781186547524f;

// For x in [2^-24, 1] (all the fill ever passes: 1 - u24).
float avx_log(float x) {
    x = std::fmax(x, 0x1p-126f); // the smallest normal: no denormals below
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    // e = biased exponent - 127, plus 1 because m below is in [0.5, 1).
    float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 127) + 1.0f;
    // m: x with its exponent replaced by 126's, so m in [0.5, 1).
    float m = std::bit_cast<float>((bits & 0x807FFFFFu) | 0x3F000000u);
    // Recentre: for m < sqrt(1/2) use 2m (and e - 1), so t = m - 1 stays
    // within [sqrt(1/2) - 1, sqrt(2) - 1). Both forms are exact.
    float t;
    if (m < kSqrtHalf) {
        e = e - 1.0f;
        t = (m - 1.0f) + m;
    } else {
        t = m - 1.0f;
    }
    const float z = t * t;
    float y = kLogP[0]; // Horner, each step fused: y = y * t + P[k]
    for (int k = 1; k < 9; ++k) y = fma_float(y, t, kLogP[k]);
    y = y * t;
    y = fma_float(y, z, e * kLogQ1); // t^3 P(t) + e Q1, fused
    y = y - z * 0.5f;                // z * 0.5 is exact
    return (t + y) + e * kLogQ2;     // e * Q2 is exact
}

// ---- float32 sin and cos as avx_mathfun's sincos256_ps computes them ----------------------
//
// Octant reduction: j = the even integer nearest above trunc(x * 4/pi), r = x
// - j * pi/4 by Cody-Waite (pi/4 = -(DP1 + DP2 + DP3), three fused steps), so
// r in [-pi/4, pi/4]; then one polynomial each for sin r and cos r, swapped
// and sign-flipped by the octant. x is in [0, 2 pi) here.

constexpr float kFourOverPi = 1.27323954473516f;
constexpr float kDP1 = -0.78515625f;
constexpr float kDP2 = -2.4187564849853515625e-4f;
constexpr float kDP3 = -3.77489497744594108e-8f;
constexpr float kSinP[3] = {-1.9515295891e-4f, 8.3321608736e-3f, -1.6666654611e-1f};
constexpr float kCosP[3] = {2.443315711809948e-5f, -1.388731625493765e-3f, 4.166664568298827e-2f};

void avx_sincos(float x, float& sin_out, float& cos_out) {
    // x >= 0, so the input's sign contributes nothing.
    int32_t j = static_cast<int32_t>(x * kFourOverPi); // truncation
    j = (j + 1) & ~1;
    const float y = static_cast<float>(j);
    float r = fma_float(y, kDP1, x);
    r = fma_float(y, kDP2, r);
    r = fma_float(y, kDP3, r);
    const float z = r * r;
    // cos r = 1 - z/2 + z^2 C(z)
    float c = fma_float(fma_float(kCosP[0], z, kCosP[1]), z, kCosP[2]);
    c = c * z;
    c = fma_float(c, z, -(z * 0.5f));
    c = c + 1.0f;
    // sin r = r + r z S(z)
    float s = fma_float(fma_float(kSinP[0], z, kSinP[1]), z, kSinP[2]);
    s = s * z;
    s = fma_float(s, r, r);
    // Octants 2, 3, 6, 7 (j & 2) swap the roles of the two polynomials.
    if ((j & 2) != 0) std::swap(s, c);
    // Signs by xor on the sign bit: sin flips when j & 4, cos when (j - 2) & 4 is 0.
    const uint32_t sin_sign = static_cast<uint32_t>(j & 4) << 29;
    const uint32_t cos_sign = static_cast<uint32_t>(~(j - 2) & 4) << 29;
    sin_out = std::bit_cast<float>(std::bit_cast<uint32_t>(s) ^ sin_sign);
    cos_out = std::bit_cast<float>(std::bit_cast<uint32_t>(c) ^ cos_sign);
}

// ---- the 16-wide Box-Muller step ---------------------------------------------------------
//
// d holds 16 uniforms in [0, 1). Lane j (0..7) pairs d[j], the radius input,
// with d[j+8], the angle input:
//   radius = sqrt(-2 log(1 - d[j])),  theta = 2 pi d[j+8],
//   d[j] = radius cos(theta) * std + mean,  d[j+8] = radius sin(theta) * std + mean,
// the last multiply-add fused.

constexpr float kTwoPiF = static_cast<float>(2.0 * 3.14159265358979323846); // 0x40C90FDB

void fill16(float* d, float mean, float std) {
    for (int j = 0; j < 8; ++j) {
        const float u1 = 1.0f - d[j]; // (0, 1], exact
        const float radius = std::sqrt(-2.0f * avx_log(u1));
        const float theta = kTwoPiF * d[j + 8];
        float s, c;
        avx_sincos(theta, s, c);
        d[j] = fma_float(radius * c, std, mean);
        d[j + 8] = fma_float(radius * s, std, mean);
    }
}

constexpr double kTwoPi = 2.0 * 3.14159265358979323846; // 6.283185307179586

void fill16(double* d, double mean, double std) {
    for (int j = 0; j < 8; ++j) {
        const double radius = std::sqrt(-2.0 * std::log(1.0 - d[j]));
        const double theta = kTwoPi * d[j + 8];
        d[j] = fma_double(radius * std::cos(theta), std, mean);
        d[j + 8] = fma_double(radius * std::sin(theta), std, mean);
    }
}

// u24 for float32 (one word), u53 for float64 (two words).
template <typename T>
T draw_uniform(Generator& gen) {
    if constexpr (std::is_same_v<T, float>) return gen.uniform_float();
    else return gen.uniform_double();
}

// n >= 16 contiguous elements at data.
template <typename T>
void normal_fill(T* data, int64_t n, T mean, T std, Generator& gen) {
    // 1. n uniforms, in order (one word each for float32, two for float64).
    for (int64_t i = 0; i < n; ++i) data[i] = draw_uniform<T>(gen);
    // 2. Every complete chunk of 16, in place.
    for (int64_t i = 0; i + 16 <= n; i += 16) fill16(data + i, mean, std);
    // 3. The tail rule: if n is not a multiple of 16, draw 16 fresh uniforms
    //    into the LAST 16 positions and transform them. This overwrites the
    //    leftover raw uniforms and also 16 - n % 16 finished values.
    if (n % 16 != 0) {
        T* last = data + n - 16;
        for (int i = 0; i < 16; ++i) last[i] = draw_uniform<T>(gen);
        fill16(last, mean, std);
    }
}

// ---- the scalar path: double Box-Muller with a cached sample -----------------------------

// One standard normal. Two uniforms give two independent normals, r cos and
// r sin of the same angle: return the first, keep the second in the
// generator for the next call (of any size, until manual_seed).
double standard_normal(Generator& gen) {
    if (gen.next_double_normal) {
        double z = *gen.next_double_normal;
        gen.next_double_normal.reset();
        return z;
    }
    const double u1 = gen.uniform_double(); // the angle
    const double u2 = gen.uniform_double(); // the radius
    const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
    const double theta = kTwoPi * u1;
    gen.next_double_normal = r * std::sin(theta);
    return r * std::cos(theta);
}

} // namespace

Tensor& Tensor::normal_(double mean, double std, Generator* generator) {
    check_fill_target(*this, "normal_");
    check_floating(*this, "normal_");
    if (!(std >= 0.0))
        fail<ValueError>("normal_", "std must be >= 0, got std=", std, " (tensor of shape ", shape(), ")");
    Generator& gen = generator_or_default(generator);
    std::lock_guard lock(gen.mutex()); // this op's draws: one run of the stream
    dispatch_floating(dtype(), "normal_", [&]<typename T>(TypeTag<T>) {
        if (numel() >= 16 && is_contiguous()) {
            // mean and std enter the 16-wide fill in the tensor's dtype.
            normal_fill<T>(data_of<T>(*this), numel(), static_cast<T>(mean), static_cast<T>(std), gen);
        } else {
            // z * std + mean in double, fused, then rounded to the dtype.
            for_each_in_memory_order<T>(*this,
                                        [&](T& x) { x = static_cast<T>(fma_double(standard_normal(gen), std, mean)); });
        }
    });
    finish_fill(*this, "NormalBackward0");
    return *this;
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* generator) {
    return random_tensor("randn", shape, options, [&](Tensor& out) { out.normal_(0.0, 1.0, generator); });
}

// Same strides as other when it is dense: a transposed input gives a
// transposed (non-contiguous) result, which takes the scalar path.
Tensor randn_like(const Tensor& other, Generator* generator) {
    return random_tensor_like("randn_like", other, [&](Tensor& out) { out.normal_(0.0, 1.0, generator); });
}

} // namespace ember
