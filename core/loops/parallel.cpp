// Thread control: see parallel.h.
// Tests: the thread-count cases of tests/test_matmul.cpp.
#include "core/loops/parallel.h"

#include "core/tensor/error.h"

namespace ember {

int get_num_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

void set_num_threads(int n) {
    if (n < 1) fail<ValueError>("set_num_threads", "thread count must be at least 1, got ", n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}

} // namespace ember
