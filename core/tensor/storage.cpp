// Storage: aligned allocation and release, and the counters memory_stats
// reports (storage.h has the contract). With the fast kernels built, the
// buffers come from core/kernels/buffer_cache.cpp, which keeps released
// ones for the next request of their size; a reference build takes each
// from operator new and gives it back at once. Tests: tests/test_storage.cpp.
#include "core/tensor/storage.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <new>

#include "core/kernels/dispatch.h"
#include "core/tensor/error.h"

namespace ember {

namespace {

constexpr std::align_val_t kAlignment{64};
constexpr size_t kMaxBytes = size_t{1} << 62; // no machine has this much: refused outright

// Buffers straight from operator new, counted: what a reference build
// allocates with. Every request is a miss; nothing is kept.
class CountedBuffers {
public:
    // `nbytes` bytes, 64-byte aligned (never null for 0 bytes), or null
    // when the system has none to give.
    void* take(size_t nbytes) {
        void* p = ::operator new(nbytes, kAlignment, std::nothrow);
        if (!p) return nullptr;
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.allocated += nbytes;
        stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
        ++stats_.misses;
        return p;
    }

    void give_back(void* p, size_t nbytes) {
        ::operator delete(p, kAlignment);
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.allocated -= nbytes;
    }

    MemoryStats stats() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stats_;
    }

    void reset_peak() {
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.peak_allocated = stats_.allocated;
    }

private:
    std::mutex mutex_;
    MemoryStats stats_;
};

// Never destroyed: a tensor in a static may outlive any destructor order.
// (Unused where the fast kernels' buffer cache takes its place.)
[[maybe_unused]] CountedBuffers& counted() {
    static CountedBuffers* buffers = new CountedBuffers;
    return *buffers;
}

} // namespace

// A size past the largest buffer (2^62 bytes; more than any address space)
// is refused before the cache could overflow rounding it up.
Storage::Storage(size_t nbytes, const char* op) : nbytes_(nbytes) {
    if (nbytes <= kMaxBytes) {
        if constexpr (internal::kFastKernelsBuilt) data_ = internal::fast::take_buffer(nbytes);
        else data_ = counted().take(nbytes);
    }
    if (!data_)
        fail<OutOfMemoryError>(op, "out of memory: cannot allocate ", human_bytes(static_cast<double>(nbytes)), " (",
                               nbytes, " bytes)");
}

Storage::~Storage() {
    if constexpr (internal::kFastKernelsBuilt) internal::fast::give_back_buffer(data_, nbytes_);
    else counted().give_back(data_, nbytes_);
}

MemoryStats memory_stats() {
    if constexpr (internal::kFastKernelsBuilt) return internal::fast::buffer_stats();
    else return counted().stats();
}

void reset_peak_memory_stats() {
    if constexpr (internal::kFastKernelsBuilt) internal::fast::reset_buffer_peak();
    else counted().reset_peak();
}

void empty_cache() {
    if constexpr (internal::kFastKernelsBuilt) internal::fast::release_kept_buffers();
}

std::string human_bytes(double bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    int unit = 0;
    while (bytes >= 1024 && unit < 8) {
        bytes /= 1024;
        ++unit;
    }
    char text[64];
    std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
    return text;
}

} // namespace ember
