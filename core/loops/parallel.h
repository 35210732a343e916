// Thread control and the one parallel loop every op and kernel uses. Public:
// a custom op may split its work the same way.
//
// parallel_for splits [begin, end) into contiguous chunks, one per thread,
// only when the range holds more than `grain` items: small tensors run on
// the calling thread and pay nothing for threads. grain_for() says how many
// items that is. Chunks own disjoint outputs, so results never depend on the
// thread count. Without OpenMP (meson -Dopenmp=disabled) everything runs
// serially. Tests: the thread-count cases of tests/test_matmul.cpp and
// tests/test_softmax.cpp, and every test again in CI's serial build.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember {

// Threads the kernels may use (OpenMP's setting; 1 without OpenMP).
int get_num_threads();
// Sets it; a ValueError for fewer than 1 or more than max_num_threads().
void set_num_threads(int n);
// The most threads set_num_threads takes: 4 per hardware thread (at least
// 4). More only slow the kernels down, and very many exhaust the machine
// (100,000 crash inside OpenMP).
int max_num_threads();

// Elements of plain element-wise work below which a loop stays on the
// calling thread: forking and joining threads costs about as much as
// touching this many floats (docs/performance.md has the measurement).
inline constexpr int64_t kElementwiseGrain = 32768;

// The grain for items that each cost `work_per_item` units (a row's length,
// a product's multiply-adds): the fewest items a thread takes, so that a
// split happens only when each thread gets at least `threshold` units.
inline int64_t grain_for(int64_t work_per_item, int64_t threshold = kElementwiseGrain) {
    return std::max<int64_t>(1, threshold / std::max<int64_t>(work_per_item, 1));
}

// Calls fn(chunk_begin, chunk_end) over chunks that cover [begin, end).
// An exception cannot cross the edge of an OpenMP region (it would
// terminate the program), so one thrown by fn (say bad_alloc) is caught in
// its thread and rethrown here, on the calling thread. Ops still validate
// their arguments before they reach a kernel.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& fn) {
    if (begin >= end) return;
#ifdef _OPENMP
    int64_t range = end - begin;
    // Stay serial for small ranges, with one thread, or when already inside a
    // parallel region (nested parallelism would oversubscribe the cores).
    if (range > grain && omp_get_max_threads() > 1 && !omp_in_parallel()) {
        std::exception_ptr error;
#pragma omp parallel
        {
            int64_t nthreads = omp_get_num_threads();
            int64_t tid = omp_get_thread_num();
            int64_t chunk = (range + nthreads - 1) / nthreads;
            int64_t b = begin + tid * chunk;
            int64_t e = b + chunk < end ? b + chunk : end;
            if (b < e) {
                try {
                    fn(b, e);
                } catch (...) {
#pragma omp critical(ember_parallel_for_error)
                    if (!error) error = std::current_exception();
                }
            }
        }
        if (error) std::rethrow_exception(error);
        return;
    }
#endif
    (void)grain;
    fn(begin, end);
}

} // namespace ember
