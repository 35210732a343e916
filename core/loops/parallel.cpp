// Thread control: see parallel.h.
// Tests: the thread-count cases of tests/test_matmul.cpp and tests/test_errors.cpp.
#include "core/loops/parallel.h"

#include <algorithm>
#include <thread>

#include "core/tensor/error.h"

namespace ember {

int get_num_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int max_num_threads() {
    const unsigned hardware = std::thread::hardware_concurrency(); // 0 when unknown
    return 4 * static_cast<int>(std::max(hardware, 1u));
}

void set_num_threads(int n) {
    if (n < 1 || n > max_num_threads())
        fail<ValueError>("set_num_threads", "thread count must be between 1 and ", max_num_threads(),
                         " (4 per hardware thread), got ", n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}

} // namespace ember
