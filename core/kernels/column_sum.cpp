// The sum of a matrix's rows, column by column, read row by row
// (fast::column_sum, dispatch.h): a faster way to sum a contiguous tensor
// over its leading dims (a bias gradient, dout summed over (B,T)) than one
// strided column at a time. The bits are those of the plain reduction in
// core/ops/reduce.cpp: each column summed in double, over increasing rows.
// Tests: tests/test_kernels.cpp.
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/loops/parallel.h"

namespace ember::internal {

// Threads own ranges of columns; the inner loop reads contiguous memory.
template <typename T>
void fast::column_sum(const T* x, int64_t rows, int64_t cols, T* out) {
    parallel_for(0, cols, grain_for(rows), [&](int64_t begin, int64_t end) {
        std::vector<double> acc(static_cast<size_t>(end - begin), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
            const T* row = x + r * cols;
            for (int64_t j = begin; j < end; ++j) acc[j - begin] += row[j];
        }
        for (int64_t j = begin; j < end; ++j) out[j] = static_cast<T>(acc[j - begin]);
    });
}
template void fast::column_sum(const float*, int64_t, int64_t, float*);
template void fast::column_sum(const double*, int64_t, int64_t, double*);

} // namespace ember::internal
