// Thread control and the one parallel loop every kernel uses.
//
// parallel_for splits [begin, end) into contiguous chunks, one per thread,
// only when the range holds more than `grain` units of work: small tensors run
// on the calling thread and pay nothing for threads. Chunks own disjoint
// outputs, so results never depend on the thread count. Without OpenMP
// (meson -Dopenmp=disabled) everything runs serially.
// Tests: tests/test_parallel.cpp.
#pragma once

#include <cstdint>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember {

// Threads the kernels may use (OpenMP's setting; 1 without OpenMP).
int get_num_threads();
void set_num_threads(int n);

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
