// Thread control, the parallel loop every op and kernel uses, a thread's
// chunk that another thread may take work from (WorkRange, and the loop
// parallel_for_balanced built on it), a team of threads for work in
// dependent steps (the packed matrix product), and a part of the work one
// thread hands to another (PartDone). Public: a custom op may split its
// work the same way.
//
// parallel_for splits [begin, end) into contiguous chunks, one per thread,
// only when the range holds more than `grain` items: small tensors run on
// the calling thread and pay nothing for threads. grain_for() says how many
// items that is. Chunks own disjoint outputs, so results never depend on the
// thread count. Without OpenMP (meson -Dopenmp=disabled) everything runs
// serially. Tests: the thread-count cases of tests/test_matmul.cpp and
// tests/test_softmax.cpp, the policy's, WorkRange's, the team's and
// PartDone's cases in tests/test_parallel.cpp, and every test again in
// CI's serial build.
//
// Note [Threads on a busy machine]. OpenMP's threads spin while they wait
// for the next loop. When another program holds one of the cores, a
// spinning helper thread uses up its share of that core, so the next loop
// often finds it descheduled and waits milliseconds for it: on two cores a
// training run beside one busy program took 3-4x longer on two threads than
// on one. So parallel_for times every loop it splits (and parallel_team
// every team): the wall time, and the chunks' times added up, about what
// it would cost on one thread.
// When a couple of milliseconds of split loops cost more than they would
// have serially, loops stay on the calling thread for a while (20 ms, then
// doubling up to 1 s while the machine stays busy), then split again to
// look. (A thread descheduled in the middle of its chunk counts in both
// sums alike: what the policy sees is threads that start late, which is
// what a spinning helper thread on a taken core does.) Results never depend
// on the thread count, so only speed changes.
// set_adaptive_threads(false) turns the policy off. docs/performance.md has
// the measurements.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

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

// Whether parallel_for (and parallel_team) run serially while threads do not pay (Note
// [Threads on a busy machine]); on by default. Tests that must exercise the
// split path turn it off.
void set_adaptive_threads(bool on);
bool adaptive_threads();

namespace internal {

// The adaptive policy of Note [Threads on a busy machine], with the clock
// passed in so that tests can drive it. Thread-safe: loops called from
// several threads at once report into the same policy.
class ThreadPolicy {
public:
    static constexpr int64_t kWindowNs = 5'000'000;       // judge after this much split-loop time
    static constexpr int64_t kFirstSerialNs = 20'000'000; // the first serial stretch
    static constexpr int64_t kLongestSerialNs = 1'000'000'000;

    // Whether a loop starting at `now` may split.
    bool may_split(int64_t now) const { return now >= serial_until_.load(std::memory_order_relaxed); }
    // A split loop ended at `now`: it took `wall` and would have taken about
    // `serial` on the calling thread alone.
    void record(int64_t now, int64_t wall, int64_t serial);
    // How many times the policy has gone serial (for tests and benches).
    int64_t serial_stretches() const { return stretches_.load(std::memory_order_relaxed); }

private:
    std::atomic<int64_t> serial_until_{0};
    std::atomic<int64_t> stretches_{0};
    std::mutex mutex_;
    int64_t wall_sum_ = 0, serial_sum_ = 0;
    int64_t next_serial_ = kFirstSerialNs;
    bool warm_ = false;
};

// The policy parallel_for and parallel_team use.
ThreadPolicy& thread_policy();

inline int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Whether parallel_for may split a loop now.
bool may_split();

} // namespace internal

// Elements of plain element-wise work below which a loop stays on the
// calling thread: forking and joining threads costs about as much as
// touching this many floats (the measurement: commit 7a49c7a).
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
    // And stay serial while the adaptive policy says threads do not pay.
    if (range > grain && omp_get_max_threads() > 1 && !omp_in_parallel() && internal::may_split()) {
        std::exception_ptr error;
        const bool timed = adaptive_threads(); // with the policy off, nothing to time
        const int64_t start = timed ? internal::steady_ns() : 0;
        std::atomic<int64_t> work_ns{0}; // every thread's chunk time, summed
#pragma omp parallel
        {
            int64_t nthreads = omp_get_num_threads();
            int64_t tid = omp_get_thread_num();
            int64_t chunk = (range + nthreads - 1) / nthreads;
            int64_t b = begin + tid * chunk;
            int64_t e = b + chunk < end ? b + chunk : end;
            if (b < e) {
                const int64_t chunk_start = timed ? internal::steady_ns() : 0;
                try {
                    fn(b, e);
                } catch (...) {
#pragma omp critical(ember_parallel_for_error)
                    if (!error) error = std::current_exception();
                }
                if (timed) work_ns.fetch_add(internal::steady_ns() - chunk_start, std::memory_order_relaxed);
            }
        }
        // The chunks' times added up: about what the loop would have cost on
        // the calling thread alone.
        if (timed) {
            const int64_t now = internal::steady_ns();
            internal::thread_policy().record(now, now - start, work_ns.load(std::memory_order_relaxed));
        }
        if (error) std::rethrow_exception(error);
        return;
    }
#endif
    (void)grain;
    fn(begin, end);
}

// Note [Taking work from the other end]. parallel_for gives each thread
// an equal chunk, and the loop ends when the slowest thread does. On a
// virtual machine or a busy laptop the two threads of one loop seldom run
// equally fast: in the macbook preset's training steps on a 2-core Zen 4
// (300 steps, instrumented), a product's or attention's two halves
// finished a median 55-65 us apart, and the first to finish waited: 6-12%
// of the threads' time in those loops, 5-9% of all of it. A WorkRange is one thread's chunk that other threads may take
// work from: its owner takes items from the front (half of what is left,
// then half of the rest, ...), and a thread that has finished its own
// takes from the back. Where the threads run alike each does its own
// chunk, front to back, as parallel_for would have had it (so each thread
// still reads the rows it wrote); where one falls behind, the other does
// the end of its chunk. Which thread does which items never changes the
// results: the items own disjoint outputs.
// Both ends live in one 64-bit word (updated by compare-and-swap, a few
// times per chunk), so a WorkRange holds fewer than 2^32 items; each
// WorkRange has a cache line of its own, so that two threads taking from
// their own ranges do not take the line from each other.
class alignas(64) WorkRange {
public:
    struct Range {
        int64_t begin, end;
    };
    static constexpr int64_t kMostItems = int64_t{1} << 32;

    WorkRange() = default;
    WorkRange(int64_t begin, int64_t end) { reset(begin, end); }
    // Before any thread takes from it; end - begin < kMostItems.
    void reset(int64_t begin, int64_t end) {
        base_ = begin;
        ends_.store(pack(0, static_cast<uint64_t>(end - begin)), std::memory_order_relaxed);
    }
    // The owner's next items, from the front: half of what is left, but at
    // least `least` items (or what is left). False once nothing is.
    bool take_front(int64_t least, Range& out) { return take(least, true, out); }
    // Another thread's, from the back.
    bool take_back(int64_t least, Range& out) { return take(least, false, out); }

private:
    static uint64_t pack(uint64_t front, uint64_t back) { return front << 32 | back; }
    bool take(int64_t least, bool front_end, Range& out) {
        uint64_t ends = ends_.load(std::memory_order_relaxed);
        for (;;) {
            const uint64_t front = ends >> 32, back = ends & 0xffffffffu;
            if (front >= back) return false;
            const uint64_t left = back - front;
            const uint64_t n = std::min(left, std::max(static_cast<uint64_t>(least), (left + 1) / 2));
            const uint64_t next = front_end ? pack(front + n, back) : pack(front, back - n);
            if (ends_.compare_exchange_weak(ends, next, std::memory_order_relaxed)) {
                const int64_t b = base_ + static_cast<int64_t>(front_end ? front : back - n);
                out = {b, b + static_cast<int64_t>(n)};
                return true;
            }
        }
    }

    int64_t base_ = 0;
    std::atomic<uint64_t> ends_{0}; // front << 32 | back, counted from base_
};

// parallel_for with WorkRanges (Note [Taking work from the other end]):
// fn(chunk_begin, chunk_end) is called for pieces that cover [begin, end)
// once, several pieces per thread. For loops whose items are costly enough
// that a thread's share is worth sharing (attention's slices); `least` is
// the fewest items a piece holds (except the last).
template <typename F>
void parallel_for_balanced(int64_t begin, int64_t end, int64_t grain, int64_t least, const F& fn) {
#ifdef _OPENMP
    const int64_t threads = omp_get_max_threads();
    if (end - begin > grain && threads > 1 && end - begin < WorkRange::kMostItems) {
        // One WorkRange per thread, cut as parallel_for cuts the range.
        const int64_t chunk = (end - begin + threads - 1) / threads;
        std::unique_ptr<WorkRange[]> ranges(new WorkRange[threads]);
        for (int64_t t = 0; t < threads; ++t)
            ranges[t].reset(std::min(end, begin + t * chunk), std::min(end, begin + (t + 1) * chunk));
        parallel_for(0, threads, 1, [&](int64_t t0, int64_t t1) {
            WorkRange::Range piece;
            for (int64_t t = t0; t < t1; ++t) // t1 > t0 + 1 only when the loop did not split
                while (ranges[t].take_front(least, piece)) fn(piece.begin, piece.end);
            for (int64_t other = 1; other < threads; ++other) // then the others' chunks, from their ends
                while (ranges[(t0 + other) % threads].take_back(least, piece)) fn(piece.begin, piece.end);
        });
        return;
    }
#endif
    (void)least;
    parallel_for(begin, end, grain, fn);
}

// Note [A team of threads]. Each parallel_for forks its threads and joins
// them at its end, about 5 us on two cores (docs/matmul.md, "Threads").
// A computation made of dependent steps, such as a matrix product that packs
// a block of B which every thread then reads, can instead keep one team for
// all its steps: parallel_team(split, fn) runs fn(team) on every thread (or
// on the calling thread alone when `split` is false, inside a parallel
// region, or while the busy-machine policy is serial), and
//   team.share(begin, end)  this thread's part of [begin, end), cut as
//                           parallel_for cuts it;
//   team.barrier()          waits until every thread of the team gets there;
//   team.run(f)             calls f() (a step's work) unless an earlier step
//                           of any thread threw; the first exception is
//                           rethrown by parallel_team on the calling thread.
// Every thread must meet every barrier, so a step that throws does not skip
// them: its thread goes on to the next barrier with nothing left to do.
class Team {
public:
    int64_t thread() const { return thread_; }
    int64_t threads() const { return threads_; }

    struct Range {
        int64_t begin, end;
    };
    Range share(int64_t begin, int64_t end) const {
        const int64_t chunk = (end - begin + threads_ - 1) / threads_;
        const int64_t b = std::min(end, begin + thread_ * chunk);
        return {b, std::min(end, b + chunk)};
    }

    void barrier() {
#ifdef _OPENMP
        if (threads_ > 1) {
#pragma omp barrier
        }
#endif
    }

    template <typename F>
    void run(const F& f) {
        if (!in_region_) { // alone, on the calling thread: nothing to catch or time
            f();
            return;
        }
        if (shared_.failed.load(std::memory_order_relaxed)) return;
        const int64_t start = shared_.timed ? internal::steady_ns() : 0;
        try {
            f();
        } catch (...) {
            std::lock_guard<std::mutex> lock(shared_.mutex);
            if (!shared_.error) shared_.error = std::current_exception();
            shared_.failed.store(true, std::memory_order_relaxed);
        }
        if (shared_.timed) shared_.work_ns.fetch_add(internal::steady_ns() - start, std::memory_order_relaxed);
    }

    // What the threads of one team share; parallel_team makes it.
    struct Shared {
        std::atomic<bool> failed{false};
        std::exception_ptr error;
        std::mutex mutex;
        bool timed = false;
        std::atomic<int64_t> work_ns{0}; // every thread's step time, summed
    };
    // in_region: inside parallel_team's OpenMP region, where an exception
    // must not escape a step (even when OpenMP gave the region one thread).
    Team(Shared& shared, int64_t thread, int64_t threads, bool in_region)
        : shared_(shared), thread_(thread), threads_(threads), in_region_(in_region) {}

private:
    Shared& shared_;
    int64_t thread_, threads_;
    bool in_region_;
};

// One thread telling another that a part of the work is done, inside a
// parallel_for whose two chunks hand work to each other (a Linear's
// gradients, LayerNorm's backward: core/kernels/). The thread doing the
// part holds a guard while it works, which marks the part done when it
// goes out of scope, by a throw too (parallel_for rethrows it), so that
// the waiting thread never waits forever; the other thread waits (spinning,
// and giving up its core to others meanwhile) before it reads what the
// part wrote. Release and acquire order the two.
class PartDone {
public:
    class Guard {
    public:
        explicit Guard(PartDone& part) : part_(part) {}
        ~Guard() { part_.done_.store(true, std::memory_order_release); }
        Guard(const Guard&) = delete;
        Guard& operator=(const Guard&) = delete;

    private:
        PartDone& part_;
    };
    void wait() const {
        while (!done_.load(std::memory_order_acquire)) std::this_thread::yield();
    }

private:
    std::atomic<bool> done_{false};
};

template <typename F>
void parallel_team(bool split, const F& fn) {
    Team::Shared shared;
#ifdef _OPENMP
    if (split && omp_get_max_threads() > 1 && !omp_in_parallel() && internal::may_split()) {
        shared.timed = adaptive_threads();
        const int64_t start = shared.timed ? internal::steady_ns() : 0;
#pragma omp parallel
        {
            Team team(shared, omp_get_thread_num(), omp_get_num_threads(), true);
            fn(team);
        }
        // As parallel_for: the steps' times added up are about what the team's
        // work would cost on the calling thread alone.
        if (shared.timed) {
            const int64_t now = internal::steady_ns();
            internal::thread_policy().record(now, now - start, shared.work_ns.load(std::memory_order_relaxed));
        }
        if (shared.error) std::rethrow_exception(shared.error);
        return;
    }
#endif
    (void)split;
    Team team(shared, 0, 1, false);
    fn(team);
}

} // namespace ember
