// Exercise: a transpose is a view (docs/exercises.md, docs/tensor.md).
// A (3,4) tensor stored row by row has strides (4,1): one step along dim 0
// skips a row of 4. Its transpose copies nothing; it swaps shape and
// strides, (4,3) with strides (1,4), over the same storage. So a write
// through the transpose shows in the original, view() refuses it (no
// single stride walks its elements in order), and reshape() copies.
//
//   build/examples/exercises/tensor_transpose_view
#include <iostream>

#include "exercise.h"

using namespace ember;

int main() {
    Tensor x = arange(12).view({3, 4});
    Tensor t = x.t();
    std::cout << "x strides: " << shape_str(x.strides()) << "\n";
    std::cout << "x.t() strides: " << shape_str(t.strides()) << "\n";
    std::cout << "x.t() is contiguous: " << py_bool(t.is_contiguous()) << "\n";
    std::cout << "same storage: " << py_bool(t.storage() == x.storage()) << "\n";

    t[0][1].fill_(100); // t[0][1] is x[1][0]
    print_value("x[1][0] after t[0][1] = 100", x[1][0].item());

    try {
        t.view({12});
        std::cout << "x.t().view(12): worked\n";
    } catch (const ShapeError& e) {
        std::cout << "x.t().view(12): " << e.what() << "\n";
    }
    Tensor flat = t.reshape({12}); // a copy, in the transpose's order: 0 4 8 1 ...
    print_values("x.t().reshape(12)", flat);
    std::cout << "reshape copied: " << py_bool(flat.storage() != x.storage()) << "\n";
    return 0;
}
