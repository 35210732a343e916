// Print options: how `std::cout << tensor` lays a tensor out, as torch.set_printoptions.
//
// The printer itself is core/tensor/print.cpp (operator<< and to_string are declared
// in tensor.h); it reproduces PyTorch 1.13's torch/_tensor_str.py character
// for character. docs/printing.md gives the rules it follows; tests/test_print.cpp
// compares it with PyTorch's repr() through tests/fixtures/fx_print.py.
// Leaves out torch's `profile` argument: PrintOptions{} is the "default" one.
#pragma once

#include <cstdint>
#include <optional>

namespace ember {

// PyTorch's defaults. threshold is a double so that "never summarise" can be
// written std::numeric_limits<double>::infinity(), as torch's float('inf').
struct PrintOptions {
    int64_t precision = 4;                       // digits after the decimal point (0 to 1000)
    double threshold = 1000;                     // more elements than this: print only the edges, with "..."
    int64_t edgeitems = 3;                       // elements kept at each end of a summarised dimension (>= 1)
    int64_t linewidth = 80;                      // characters per line before a row wraps
    std::optional<bool> sci_mode = std::nullopt; // force scientific notation on or off; unset: chosen per tensor
};

// Replaces every option: set_printoptions(PrintOptions{}) restores the
// defaults, set_printoptions({.precision = 2}) is the defaults but precision 2.
// Throws ValueError naming the bad field (negative precision, edgeitems < 1).
void set_printoptions(const PrintOptions& options);

// torch.set_printoptions(precision=..., ...): the options given change, the
// others keep their current values -- except sci_mode, which, exactly as in
// torch, goes back to "chosen per tensor" unless it is given.
//   set_printoptions(2);                  // precision=2
//   set_printoptions(std::nullopt, 5);    // threshold=5
//   set_printoptions();                   // only resets sci_mode
void set_printoptions(std::optional<int64_t> precision = std::nullopt, std::optional<double> threshold = std::nullopt,
                      std::optional<int64_t> edgeitems = std::nullopt, std::optional<int64_t> linewidth = std::nullopt,
                      std::optional<bool> sci_mode = std::nullopt);

// The options in force.
const PrintOptions& get_printoptions();

} // namespace ember
