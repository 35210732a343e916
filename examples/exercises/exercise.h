// Printing helpers shared by the exercise solutions (docs/exercises.md).
// Every number a solution claims is printed on a line of its own,
// "label: v1 v2 ...", so that a reader sees it and tests/test_exercises.cpp
// can read it back and check it against PyTorch or the math.
#pragma once

#include <cstdio>
#include <string>

#include <ember.h>

// "label: 0.5" with enough digits to compare against PyTorch.
inline void print_value(const std::string& label, double value) { std::printf("%s: %.9g\n", label.c_str(), value); }

// "label: v1 v2 ...": every element of t in row-major order (its shape is
// for the reader to know; the label should say it).
inline void print_values(const std::string& label, const ember::Tensor& t) {
    ember::Tensor flat = t.detach().to(ember::kFloat64).contiguous();
    const double* p = flat.data_ptr<double>();
    std::printf("%s:", label.c_str());
    for (int64_t i = 0; i < flat.numel(); ++i) std::printf(" %.9g", p[i]);
    std::printf("\n");
}

// Python's print(bool).
inline const char* py_bool(bool b) { return b ? "True" : "False"; }
