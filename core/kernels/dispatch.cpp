// The switch between definitions and fast kernels: see dispatch.h.
// Tests: tests/test_kernels.cpp.
#include "core/kernels/dispatch.h"

#include <atomic>

namespace ember::internal::fast {

namespace {
std::atomic<bool> on{true};
} // namespace

bool enabled() { return on.load(std::memory_order_relaxed); }

void set_enabled(bool value) { on.store(value, std::memory_order_relaxed); }

} // namespace ember::internal::fast
