// The buffer cache behind Storage (core/tensor/storage.cpp) when the fast
// kernels are built: released buffers are kept and handed out again,
// instead of going back to the system (the rule below; dispatch.h has the
// entry points). Tests: tests/test_storage.cpp.
#include <array>
#include <bit>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/tensor/platform.h"

#if defined(EMBER_ASAN)
#include <sanitizer/asan_interface.h>
#define EMBER_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define EMBER_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define EMBER_POISON(p, n) ((void)(p), (void)(n))
#define EMBER_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

// The buffer cache. Why: a training step allocates the same tensors every
// step. glibc serves large blocks (attention's scores, 100 MB each at the
// lecture size) with a fresh mmap and unmaps them on free, so every step the
// kernel hands out new pages and zeroes each one on first touch; small blocks
// go through glibc's aligned allocation path and the merging of freed blocks.
// Both showed in profiles of a training step (docs/training.md, "What made
// ember fast here"); a hit here is a mutex and a vector pop.
//
// The rule. A released buffer is kept, and the next request of its size
// takes it back (the one released last: its memory is the likeliest to still
// be in the CPU's caches). Sizes are filed in classes: under kMinCached,
// four per doubling (..., 256, 320, 384, 448, 512, ...), so a buffer is at
// most a quarter larger than asked; from kMinCached up, whole pages. The
// cache never lets the process grow past half again its own busiest
// moment: before fresh memory is allocated, kept buffers are released
// (small ones first, then large ones oldest first) until live + kept + the
// request fits under 1.5 times the most live memory seen so far. So a
// steady loop runs from the cache without a page fault, and a pattern of
// new sizes cannot pile up unused buffers past that bound. empty_cache()
// releases every kept buffer.
//
// Why half again, and not the busiest moment itself: a step's live sizes
// change their mix. At the end of the forward pass the MLP's wide
// activations live; in the backward pass gradients of other sizes do,
// fewer bytes but in buffers the peak's do not fit. Under a bound at the
// peak, each such moment gave back buffers that the next step asked for
// again: on train_gpt's macbook preset, 15,315 of 77,505 requests in 100
// steps went to the system (a fresh mmap, every page zeroed on first
// touch): the run's CPU time halved without them (14.8 s against 7.2 s,
// user and system, on one thread). Under 1.25 times the peak, 350 did;
// under 1.5 times, 309 (the first step's and the evaluations'), as under 2
// times; resident memory grew by a tenth (61 to 68 MB).

namespace ember::internal {

namespace {

constexpr std::align_val_t kAlignment{64};
constexpr size_t kMinCached = size_t{1} << 18; // 256 KiB: from here on, sizes in whole pages
constexpr size_t kPage = 4096;

// Small classes: class 0 holds 64 bytes; class c > 0 holds 2^e + q * 2^(e-2)
// bytes with e = 6 + (c-1)/4 and q = 1 + (c-1)%4. The last, 48, is 256 KiB.
constexpr size_t kSmallClasses = 49;

size_t small_class(size_t bytes) {
    if (bytes <= 64) return 0;
    const int e = std::bit_width(bytes - 1) - 1; // 2^e < bytes <= 2^(e+1)
    const size_t quarter = size_t{1} << (e - 2);
    const size_t q = (bytes - (size_t{1} << e) + quarter - 1) / quarter; // 1..4
    return static_cast<size_t>(e - 6) * 4 + q;
}

size_t small_class_bytes(size_t c) {
    if (c == 0) return 64;
    const int e = 6 + static_cast<int>((c - 1) / 4);
    return (size_t{1} << e) + ((c - 1) % 4 + 1) * (size_t{1} << (e - 2));
}

// The size of the buffer that serves a request of `nbytes`.
size_t buffer_bytes(size_t nbytes) {
    if (nbytes < kMinCached) return small_class_bytes(small_class(nbytes));
    return (nbytes + kPage - 1) / kPage * kPage;
}

class BufferCache {
public:
    // A buffer of `bytes`, or null when the system has none to give.
    void* take(size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (void* p = kept(bytes)) {
            stats_.cached -= bytes;
            ++stats_.hits;
            EMBER_UNPOISON(p, bytes);
            return hand_out(p, bytes);
        }
        // Fresh memory: first make room under 1.5 times the high-water mark.
        while (stats_.cached > 0 && stats_.allocated + stats_.cached + bytes > bound()) release_one();
        ++stats_.misses;
        // A failure (null) is reported by the caller as an ember error.
        void* p = allocate(bytes);
        if (!p) {
            // Kept buffers must never be why memory runs out: give them all
            // back and try once more.
            while (stats_.cached > 0) release_one();
            p = allocate(bytes);
        }
        return p ? hand_out(p, bytes) : nullptr;
    }

    void give_back(void* p, size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.allocated -= bytes;
        EMBER_POISON(p, bytes);
        if (bytes < kMinCached) {
            small_[small_class(bytes)].push_back(p);
        } else {
            lru_.emplace_back(bytes, p);
            by_size_.emplace(bytes, std::prev(lru_.end()));
        }
        stats_.cached += bytes;
    }

    void clear() {
        std::lock_guard<std::mutex> lock(mutex_);
        while (stats_.cached > 0) release_one();
    }

    MemoryStats stats() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stats_;
    }

    // The high-water mark from now on: what lives now, with nothing kept.
    void reset_peak() {
        std::lock_guard<std::mutex> lock(mutex_);
        while (stats_.cached > 0) release_one();
        stats_.peak_allocated = stats_.allocated;
    }

private:
    using Block = std::pair<size_t, void*>; // (bytes, pointer)

    // What live and kept memory may reach together: half again the peak.
    size_t bound() const { return stats_.peak_allocated + stats_.peak_allocated / 2; }

    // A kept buffer of exactly `bytes`, taken out of the cache, or null.
    void* kept(size_t bytes) {
        if (bytes < kMinCached) {
            std::vector<void*>& list = small_[small_class(bytes)];
            if (list.empty()) return nullptr;
            void* p = list.back();
            list.pop_back();
            return p;
        }
        // Of the kept buffers of this size, the one released last.
        auto found = by_size_.upper_bound(bytes);
        if (found == by_size_.begin() || (--found)->first != bytes) return nullptr;
        void* p = found->second->second;
        lru_.erase(found->second);
        by_size_.erase(found);
        return p;
    }

    void* hand_out(void* p, size_t bytes) {
        stats_.allocated += bytes;
        if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
        return p;
    }

    // Returns one kept buffer to the system: a small one from the largest
    // class that has one, else the large buffer kept longest ago.
    void release_one() {
        for (size_t c = kSmallClasses; c-- > 0;) {
            if (small_[c].empty()) continue;
            release(small_[c].back(), small_class_bytes(c));
            small_[c].pop_back();
            return;
        }
        auto [bytes, p] = lru_.front();
        for (auto it = by_size_.find(bytes); it != by_size_.end() && it->first == bytes; ++it)
            if (it->second == lru_.begin()) {
                by_size_.erase(it);
                break;
            }
        lru_.pop_front();
        release(p, bytes);
    }

    void release(void* p, size_t bytes) {
        stats_.cached -= bytes;
        EMBER_UNPOISON(p, bytes);
        deallocate(p, bytes);
    }

    // Large buffers come straight from the kernel (mmap; VirtualAlloc on
    // Windows: core/tensor/platform.h) and go straight back, so that memory
    // the cache releases leaves the process: glibc keeps freed blocks in its
    // heap, where a process's resident memory grew to 1.4 times its busiest
    // moment's live tensors. Under AddressSanitizer they go through operator
    // new, which it checks. Null on failure: the nothrow form
    // (AddressSanitizer's throwing one aborts instead).
    static void* allocate(size_t bytes) {
#if !defined(EMBER_ASAN)
        if (bytes >= kMinCached) {
            return allocate_pages(bytes); // page-aligned, so 64-byte aligned
        }
#endif
        return ::operator new(bytes, kAlignment, std::nothrow);
    }
    static void deallocate(void* p, [[maybe_unused]] size_t bytes) {
#if !defined(EMBER_ASAN)
        if (bytes >= kMinCached) {
            release_pages(p, bytes);
            return;
        }
#endif
        ::operator delete(p, kAlignment);
    }

    std::mutex mutex_;
    std::array<std::vector<void*>, kSmallClasses> small_;       // kept small buffers, by class
    std::list<Block> lru_;                                      // kept large buffers, oldest first
    std::multimap<size_t, std::list<Block>::iterator> by_size_; // the same buffers, by size
    MemoryStats stats_;
};

// Never destroyed: a tensor in a static may outlive any destructor order.
BufferCache& cache() {
    static BufferCache* c = new BufferCache;
    return *c;
}

} // namespace

void* fast::take_buffer(size_t nbytes) { return cache().take(buffer_bytes(nbytes)); }

void fast::give_back_buffer(void* data, size_t nbytes) { cache().give_back(data, buffer_bytes(nbytes)); }

MemoryStats fast::buffer_stats() { return cache().stats(); }

void fast::release_kept_buffers() { cache().clear(); }

void fast::reset_buffer_peak() { cache().reset_peak(); }

} // namespace ember::internal
