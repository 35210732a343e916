// The fast/reference switch and the CPU check: see dispatch.h.
// Tests: tests/test_kernels.cpp.
#include "core/kernels/dispatch.h"

#include <atomic>

namespace ember::internal {

namespace {
std::atomic<bool> fast_kernels{kFastKernelsBuilt};
} // namespace

bool use_fast_kernels() { return kFastKernelsBuilt && fast_kernels.load(std::memory_order_relaxed); }

void set_fast_kernels(bool on) { fast_kernels.store(on && kFastKernelsBuilt, std::memory_order_relaxed); }

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
#else
    return false;
#endif
}

bool cpu_has_avx512f() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    return has;
#else
    return false;
#endif
}

} // namespace ember::internal
