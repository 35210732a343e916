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

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember {

// Threads the kernels may use (OpenMP's setting; 1 without OpenMP).
int get_num_threads();
void set_num_threads(int n);

// Calls fn(chunk_begin, chunk_end) over chunks that cover [begin, end).
// fn must not throw: an exception cannot leave an OpenMP region, so every op
// validates its arguments before it reaches a kernel.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& fn) {
    if (begin >= end) return;
#ifdef _OPENMP
    int64_t range = end - begin;
    // Stay serial for small ranges, with one thread, or when already inside a
    // parallel region (nested parallelism would oversubscribe the cores).
    if (range > grain && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel
        {
            int64_t nthreads = omp_get_num_threads();
            int64_t tid = omp_get_thread_num();
            int64_t chunk = (range + nthreads - 1) / nthreads;
            int64_t b = begin + tid * chunk;
            int64_t e = b + chunk < end ? b + chunk : end;
            if (b < e) fn(b, e);
        }
        return;
    }
#endif
    (void)grain;
    fn(begin, end);
}

} // namespace ember
