// Storage: aligned allocation and release, through a cache for large
// buffers. See storage.h.
//
// Why a cache. A training step allocates the same tensors every step: the
// lecture config's attention scores and feed-forward activations are 100 MB
// each, dozens per step. glibc serves blocks that large with a fresh mmap and
// unmaps them on free, so every step the kernel hands out new pages and
// zeroes each one on first touch: perf put 28% of a lecture step in the
// kernel's clear_page, and a third of the wall time in the system.
//
// The rule. A released buffer of kMinCached bytes or more is kept, filed by
// its size rounded up to a whole page, and the next request for that size
// takes it back. The cache never lets the process grow past its own busiest
// moment: before fresh memory is allocated, kept buffers are released
// (oldest first) until live + kept + the request fits under the most live
// memory seen so far. So a steady loop runs from the cache without a page
// fault, a pattern of new sizes cannot pile up unused buffers, and peak
// memory is what it was without the cache. empty_cache() releases every kept
// buffer. Smaller buffers go straight to operator new, which reuses them well.
#include "storage.h"

#include <list>
#include <map>
#include <mutex>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMBER_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define EMBER_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define EMBER_POISON(p, n) ((void)(p), (void)(n))
#define EMBER_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace ember {

static constexpr std::align_val_t kAlignment{64};
static constexpr size_t kMinCached = size_t{1} << 18; // 256 KiB
static constexpr size_t kPage = 4096;

namespace {

class BufferCache {
public:
    void* take(size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        // Of the kept buffers of this size, the one released last: its
        // memory is the likeliest to still be in the CPU's caches.
        auto found = by_size_.upper_bound(bytes);
        if (found != by_size_.begin() && (--found)->first == bytes) {
            void* p = found->second->second;
            lru_.erase(found->second);
            by_size_.erase(found);
            stats_.cached -= bytes;
            ++stats_.hits;
            EMBER_UNPOISON(p, bytes);
            return hand_out(p, bytes);
        }
        // Fresh memory: first make room under the high-water mark.
        while (!lru_.empty() && stats_.allocated + stats_.cached + bytes > stats_.peak_allocated) release_oldest();
        ++stats_.misses;
        void* p;
        try {
            p = ::operator new(bytes, kAlignment);
        } catch (const std::bad_alloc&) {
            // Kept buffers must never be why memory runs out: give them all
            // back and try once more (a second failure reaches the caller).
            while (!lru_.empty()) release_oldest();
            p = ::operator new(bytes, kAlignment);
        }
        return hand_out(p, bytes);
    }

    void give_back(void* p, size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.allocated -= bytes;
        EMBER_POISON(p, bytes);
        lru_.emplace_back(bytes, p);
        by_size_.emplace(bytes, std::prev(lru_.end()));
        stats_.cached += bytes;
    }

    void clear() {
        std::lock_guard<std::mutex> lock(mutex_);
        while (!lru_.empty()) release_oldest();
    }

    MemoryStats stats() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stats_;
    }

private:
    using Block = std::pair<size_t, void*>; // (bytes, pointer)

    void* hand_out(void* p, size_t bytes) {
        stats_.allocated += bytes;
        if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
        return p;
    }

    // Returns the buffer kept longest ago to the system.
    void release_oldest() {
        auto [bytes, p] = lru_.front();
        for (auto it = by_size_.find(bytes); it != by_size_.end() && it->first == bytes; ++it)
            if (it->second == lru_.begin()) {
                by_size_.erase(it);
                break;
            }
        lru_.pop_front();
        stats_.cached -= bytes;
        EMBER_UNPOISON(p, bytes);
        ::operator delete(p, kAlignment);
    }

    std::mutex mutex_;
    std::list<Block> lru_;                                    // kept buffers, oldest first
    std::multimap<size_t, std::list<Block>::iterator> by_size_; // the same buffers, by size
    MemoryStats stats_;
};

// Never destroyed: a tensor in a static may outlive any destructor order.
BufferCache& cache() {
    static BufferCache* c = new BufferCache;
    return *c;
}

size_t rounded(size_t nbytes) { return (nbytes + kPage - 1) / kPage * kPage; }

} // namespace

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
    // operator new with an alignment throws std::bad_alloc on failure; a size
    // of zero still returns a unique pointer, so data() is never null.
    if (nbytes >= kMinCached) data_ = cache().take(rounded(nbytes));
    else data_ = ::operator new(nbytes == 0 ? 1 : nbytes, kAlignment);
}

Storage::~Storage() {
    if (nbytes_ >= kMinCached) cache().give_back(data_, rounded(nbytes_));
    else ::operator delete(data_, kAlignment);
}

MemoryStats memory_stats() { return cache().stats(); }

void empty_cache() { cache().clear(); }

} // namespace ember
