// row_sum: the order in which ember sums a row in double (LayerNorm's
// statistics and its gradient's means). Private.
//
// sum_{j < n} f(j) as eight interleaved partial sums (j mod 8), added
// pairwise at the end. One running sum makes every add wait for the one
// before it; eight independent ones keep the adder busy. The order is part
// of the result (it decides the last bits), so the plain loops and the fast
// kernels both sum this way, and it never depends on the thread count.
// Tests: tests/test_layer_norm.cpp.
#pragma once

#include <cstdint>

namespace ember::internal {

template <typename F>
double row_sum(int64_t n, const F& f) {
    double part[8] = {};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; ++k) part[k] += f(j + k);
    for (; j < n; ++j) part[j % 8] += f(j);
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

} // namespace ember::internal
