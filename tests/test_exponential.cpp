// ember's float exponential and erf (core/loops/exponential.h, erf.h) against those of
// the C library in double, rounded once to float: a reference from the math,
// good to far below a float's last bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "check.h"
#include "core/loops/erf.h"
#include "core/loops/exponential.h"

using ember::internal::exp_float;

namespace {

// How many floats lie between a and b (both finite or both the same infinity).
int64_t ulps_apart(float a, float b) {
    const auto key = [](float f) { // the floats in order as integers, -0 and +0 together
        const int32_t i = std::bit_cast<int32_t>(f);
        return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
    };
    const int64_t d = key(a) - key(b);
    return d < 0 ? -d : d;
}

float reference(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }

} // namespace

TEST_CASE("exp_float is within 1 ulp of e^x for every 251st float, and exact for nearly all", "[exponential]") {
    int64_t count = 0, off_by_one = 0, worst = 0;
    float worst_x = 0;
    for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 251) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
        if (std::isnan(x)) continue;
        ++count;
        const int64_t d = ulps_apart(exp_float(x), reference(x));
        if (d == 1) ++off_by_one;
        if (d > worst) worst = d, worst_x = x;
    }
    INFO("worst at x = " << worst_x << ": " << exp_float(worst_x) << " vs " << reference(worst_x));
    CHECK(worst <= 1);
    CHECK(count > 16000000);
    CHECK(off_by_one < count / 100); // about 0.4% measured
}

TEST_CASE("exp_float's special values and the ends of its range", "[exponential]") {
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(exp_float(0.0f) == 1.0f);
    CHECK(exp_float(-0.0f) == 1.0f);
    CHECK(exp_float(-inf) == 0.0f); // a masked softmax entry: exactly nothing
    CHECK(exp_float(inf) == inf);
    CHECK(std::isnan(exp_float(std::numeric_limits<float>::quiet_NaN())));
    CHECK(exp_float(-1000.0f) == 0.0f);
    CHECK(exp_float(1000.0f) == inf);
    // Around the overflow threshold (ln FLT_MAX = 88.7228...) and the subnormals.
    for (float x :
         {88.7f, 88.72f, 88.7228f, 88.73f, 89.0f, -87.0f, -87.4f, -100.0f, -103.0f, -103.9f, -104.0f, -110.0f}) {
        INFO("x = " << x);
        CHECK(ulps_apart(exp_float(x), reference(x)) <= 1);
    }
    CHECK(exp_float(1.0f) == Approx(2.718281828).epsilon(1e-7));
}

TEST_CASE("softmax over contiguous rows and over strided rows gives the same bits", "[exponential][softmax]") {
    // Contiguous rows take a path that exponentiates several rows at once;
    // the transposed view takes the one-row path. Each row's arithmetic must
    // be the same.
    for (int64_t n : {1, 3, 8, 65, 128, 129, 300}) {
        INFO("rows of " << n);
        ember::manual_seed(static_cast<uint64_t>(n));
        ember::Tensor x = ember::randn({37, n}) * 4;
        ember::Tensor by_rows = ember::softmax(x, -1);
        ember::Tensor by_columns = ember::softmax(x.t().contiguous(), 0).t();
        ember::testing::require_equal(by_rows, by_columns, "softmax");
    }
}

namespace {

float erf_reference(float x) { return static_cast<float>(std::erf(static_cast<double>(x))); }

} // namespace

TEST_CASE("erf_float is within 1 ulp of erf for every 251st float", "[exponential][erf]") {
    int64_t count = 0, exact = 0, worst = 0;
    float worst_x = 0;
    for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 251) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
        if (std::isnan(x)) continue;
        ++count;
        const int64_t d = ulps_apart(ember::internal::erf_float(x), erf_reference(x));
        if (d == 0) ++exact;
        if (d > worst) worst = d, worst_x = x;
    }
    INFO("worst at x = " << worst_x << ": " << ember::internal::erf_float(worst_x) << " vs " << erf_reference(worst_x));
    CHECK(worst <= 1);
    CHECK(count > 16000000);
    CHECK(exact > count * 9 / 10); // about 97% measured
}

TEST_CASE("erf_float near its seam, at its ends and for special values", "[exponential][erf]") {
    using ember::internal::erf_float;
    const float inf = std::numeric_limits<float>::infinity();
    // Every float within 2^16 steps of the seam at 0.875 and of the clamp at 4.
    for (float edge : {0.875f, -0.875f, 4.0f, 3.92f}) {
        float x = edge;
        for (int i = 0; i < (1 << 16); ++i) x = std::nextafter(x, 0.0f);
        for (int i = 0; i < (1 << 17); ++i, x = std::nextafter(x, edge * 2)) {
            INFO("x = " << x);
            REQUIRE(ulps_apart(erf_float(x), erf_reference(x)) <= 1);
        }
    }
    CHECK(erf_float(0.0f) == 0.0f);
    CHECK(std::signbit(erf_float(-0.0f)));
    CHECK(erf_float(inf) == 1.0f);
    CHECK(erf_float(-inf) == -1.0f);
    CHECK(erf_float(1e30f) == 1.0f);
    CHECK(ulps_apart(erf_float(1e-40f), erf_reference(1e-40f)) <= 1); // a subnormal: 2/sqrt(pi) x
    CHECK(std::isnan(erf_float(std::numeric_limits<float>::quiet_NaN())));
    CHECK(erf_float(1.0f) == Approx(0.8427007929).epsilon(1e-7));
    CHECK(erf_float(-2.0f) == Approx(-0.9953222650).epsilon(1e-7));
}
