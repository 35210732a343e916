// tensor_views: how one block of memory becomes many tensors.
//
// Prints the storage, shape, strides and offset of a tensor and of views of
// it (transpose, slice, select, expand), shows that a write through a view
// lands in the shared storage, that reshape copies only when strides forbid a
// view, and how broadcasting lines shapes up. docs/tensor.md walks through
// this output line by line.
//
//   build/examples/tensor_views
#include <cstdio>
#include <iostream>
#include <string>

#include <ember.h>

#include "flags.h"

using namespace ember;

static void describe(const std::string& name, const Tensor& t) {
    std::printf("%-28s shape %-6s strides %-6s offset %lld  %s\n", name.c_str(), shape_str(t.shape()).c_str(),
                shape_str(t.strides()).c_str(), static_cast<long long>(t.storage_offset()),
                t.is_contiguous() ? "contiguous" : "not contiguous");
}

const char* const kAbout = "How one block of memory becomes many tensors: storage, shape, strides\n"
                           "and offset of a tensor and its views (docs/tensor.md).\n";

int main(int argc, char** argv) {
    const int stop = flags::threads_and_help(argc, argv, "tensor_views", kAbout, max_num_threads(), set_num_threads);
    if (stop >= 0) return stop; // after --help, or a bad command line
    Tensor x = arange(12).view({3, 4});
    std::cout << "x = arange(12).view({3, 4}):\n" << x << "\n\n";
    describe("x", x);
    describe("x.t()", x.t());
    describe("x.slice(1, 1, 4, 2)", x.slice(1, 1, 4, 2));
    describe("x.select(0, 2)", x.select(0, 2));
    describe("x[2].unsqueeze(0)", x[2].unsqueeze(0));
    describe("x.select(1, 0).unsqueeze(1)", x.select(1, 0).unsqueeze(1));
    describe("  .expand({3, 5})", x.select(1, 0).unsqueeze(1).expand({3, 5}));

    std::cout << "\nA write through a view is a write to the shared storage:\n";
    x.t()[3].fill_(-1); // row 3 of x.t() is column 3 of x
    std::cout << "after x.t()[3].fill_(-1), x =\n" << x << "\n";

    std::cout << "\nview() needs strides that allow it; reshape() copies when they do not:\n";
    Tensor t = x.t();
    try {
        t.view({12});
    } catch (const ShapeError& e) {
        std::cout << "t.view({12}) throws: " << e.what() << "\n";
    }
    Tensor flat = t.reshape({12});
    std::cout << "t.reshape({12}) = " << flat << "  (a copy: " << (flat.storage() == x.storage() ? "same" : "new")
              << " storage)\n";

    std::cout << "\nBroadcasting lines shapes up from the right: (3,1) + (4) -> (3,4)\n";
    Tensor col = tensor({{0.f}, {10.f}, {20.f}});
    Tensor row = tensor({1.f, 2.f, 3.f, 4.f});
    std::cout << col + row << "\n";
    return 0;
}
