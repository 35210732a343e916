// Storage: the flat, reference-counted buffer that tensors view.
//
// A tensor is a window (shape, strides, offset) onto a Storage; views share one
// Storage through a shared_ptr, so a write through any view is seen by all of
// them, and the buffer is freed when the last view goes. The version counter
// counts in-place writes, which lets autograd notice when a tensor it saved for
// backward has been overwritten (docs/autograd.md). Buffers are 64-byte
// aligned for the SIMD kernels; with the fast kernels built they are
// recycled through a cache (core/kernels/buffer_cache.cpp says why and how).
// Tests: tests/test_tensor.cpp, tests/test_storage.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember {

class Storage {
public:
    // An uninitialised buffer of `nbytes` bytes, 64-byte aligned. When the
    // machine cannot give that much, throws OutOfMemoryError naming `op` (the
    // op whose tensor it is) and the size.
    explicit Storage(size_t nbytes, const char* op = "Storage");
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    void* data() const { return data_; }
    size_t nbytes() const { return nbytes_; }

    // Bumped by every in-place op on any tensor viewing this storage.
    uint64_t version() const { return version_; }
    void bump_version() { ++version_; }

    // Bumped when an in-place op inside the autograd graph gives a tensor on
    // this storage a new history: views taken earlier now carry a stale one.
    uint64_t history_version() const { return history_version_; }
    void bump_history_version() { ++history_version_; }

private:
    void* data_ = nullptr;
    size_t nbytes_ = 0;
    uint64_t version_ = 0;
    uint64_t history_version_ = 0;
};

// Memory in tensors' buffers, in bytes: what tensors hold now, the most
// they ever held at once, and what the buffer cache keeps for reuse; hits
// and misses count requests served from the cache and from fresh memory.
// With the buffer cache (the fast kernels built), each request counts as
// the size class it is rounded up to; without it (a reference build), as
// asked, and nothing is kept: cached and hits stay 0.
struct MemoryStats {
    size_t allocated = 0;
    size_t peak_allocated = 0;
    size_t cached = 0;
    uint64_t hits = 0;
    uint64_t misses = 0;
};
MemoryStats memory_stats();

// Starts peak_allocated again from what tensors hold now, like
// torch.cuda.reset_peak_memory_stats(): to measure one step's peak. Releases
// the kept buffers first (as empty_cache), since the cache's bound is 1.5
// times the peak.
void reset_peak_memory_stats();

// Returns every buffer the cache keeps to the system (live tensors are not
// touched), like torch.cuda.empty_cache().
void empty_cache();

// A size for people, in binary units: "512 bytes", "1.5 KiB", "2.0 EiB"
// (one decimal from KiB up), as ember's out-of-memory errors print it.
std::string human_bytes(double bytes);

} // namespace ember
