// Thread control: see parallel.h.
// Tests: the thread-count cases of tests/test_matmul.cpp and tests/test_errors.cpp,
// the policy in tests/test_parallel.cpp.
#include "core/loops/parallel.h"

#include <algorithm>
#include <atomic>
#include <mutex>
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

namespace {
std::atomic<bool> adaptive{true};
} // namespace

void set_adaptive_threads(bool on) { adaptive.store(on, std::memory_order_relaxed); }
bool adaptive_threads() { return adaptive.load(std::memory_order_relaxed); }

namespace internal {

void ThreadPolicy::record(int64_t now, int64_t wall, int64_t serial) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!warm_) {
        // The first split loop of the run, or the first after a serial
        // stretch, also wakes the sleeping threads: not a fair sample.
        warm_ = true;
        return;
    }
    wall_sum_ += wall;
    serial_sum_ += serial;
    if (wall_sum_ < kWindowNs) return;
    if (wall_sum_ > serial_sum_) {
        // Splitting cost more than it saved: stay serial, longer each time
        // the machine is still busy when we look again.
        serial_until_.store(now + next_serial_, std::memory_order_relaxed);
        stretches_.fetch_add(1, std::memory_order_relaxed);
        warm_ = false;
        next_serial_ = std::min(2 * next_serial_, kLongestSerialNs);
    } else {
        next_serial_ = kFirstSerialNs;
    }
    wall_sum_ = serial_sum_ = 0;
}

ThreadPolicy& thread_policy() {
    static ThreadPolicy policy;
    return policy;
}

bool may_split() { return !adaptive_threads() || thread_policy().may_split(steady_ns()); }

} // namespace internal

} // namespace ember
