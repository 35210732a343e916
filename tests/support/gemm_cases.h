// The matrix-kernel tests' cases (tests/test_gemm.cpp,
// tests/test_gemm_portable.cpp): shapes around the kernels' tiles and
// blocks, each in every layout of A and B and both accumulate modes.
#pragma once

#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "check.h"
#include "core/ops/matmul.h"

namespace ember::testing {

struct Shape3 {
    int64_t m, k, n;
};

// Beside sizes around the kernels' tiles (6 x 16, 8 x 12) and blocks (256
// deep): C 8 wide and a last panel 5 to 8 wide (the 8-column tile), 1 to 4
// wide (the thin-edge kernel: 19, 65, 17, 1, 2, 3), and B more than 8 wide
// when the direct driver copies a transposed B in 8x8 blocks.
inline const std::vector<Shape3> kAwkwardShapes = {{1, 1, 1},     {1, 7, 1},     {7, 1, 5},      {13, 17, 19},
                                                   {64, 64, 64},  {65, 65, 65},  {97, 300, 31},  {257, 31, 300},
                                                   {3, 513, 2},   {300, 2, 1},   {6, 256, 16},   {7, 257, 17},
                                                   {1, 600, 700}, {700, 600, 1}, {200, 9000, 3}, {8, 8, 8},
                                                   {9, 20, 8},    {17, 33, 70},  {30, 41, 22}};

// Calls body(s, a, b, accumulate) for every shape of `shapes`, every layout
// (A and B transposed or not, read in place) and both accumulate modes, in
// one section per shape and layout; A and B hold pattern_values from `seed`.
template <typename T, typename Body>
void for_each_case(const std::vector<Shape3>& shapes, uint32_t seed, const Body& body) {
    for (const Shape3& s : shapes) {
        for (int layout = 0; layout < 4; ++layout) {
            const bool ta = layout & 1, tb = layout & 2;
            DYNAMIC_SECTION(s.m << "x" << s.k << "x" << s.n << (ta ? " A^T" : "") << (tb ? " B^T" : "")) {
                std::vector<float> af = pattern_values(s.m * s.k, seed), bf = pattern_values(s.k * s.n, seed + 1);
                std::vector<T> a(af.begin(), af.end()), b(bf.begin(), bf.end());
                internal::MatrixRef<const T> ma{a.data(), s.m, s.k, ta ? 1 : s.k, ta ? s.m : 1};
                internal::MatrixRef<const T> mb{b.data(), s.k, s.n, tb ? 1 : s.n, tb ? s.k : 1};
                for (bool accumulate : {false, true}) body(s, ma, mb, accumulate);
            }
        }
    }
}

} // namespace ember::testing
