// The large-buffer cache behind Storage (core/storage.cpp): released buffers
// of 256 KiB or more come back for the same size, and the cache never holds
// the process above the most memory its tensors ever used at once.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "check.h"

using namespace ember;

namespace {

constexpr size_t kPage = 4096;

// A float tensor of exactly `bytes` bytes (a whole number of pages).
Tensor block(size_t bytes) { return empty({static_cast<int64_t>(bytes / sizeof(float))}); }

const void* address(const Tensor& t) { return t.storage()->data(); }

} // namespace

TEST_CASE("a released large buffer serves the next request of its size", "[storage]") {
    empty_cache();
    const size_t bytes = 1024 * kPage; // 4 MiB
    Tensor a = block(bytes);
    const void* first = address(a);
    const MemoryStats before = memory_stats();
    a = Tensor();
    CHECK(memory_stats().cached == before.cached + bytes);
    CHECK(memory_stats().allocated == before.allocated - bytes);

    Tensor b = block(bytes);
    CHECK(address(b) == first);
    CHECK(memory_stats().hits == before.hits + 1);
    CHECK(memory_stats().cached == before.cached);

    // A second live tensor of the same size cannot share it.
    Tensor c = block(bytes);
    CHECK(address(c) != address(b));
    CHECK(memory_stats().misses == before.misses + 1);

    // The reused buffer holds the new tensor's values.
    b.fill_(3.0f);
    c.fill_(4.0f);
    CHECK(b.data_ptr<float>()[12345] == 3.0f);
    CHECK(c.data_ptr<float>()[12345] == 4.0f);
}

TEST_CASE("small buffers bypass the cache", "[storage]") {
    const MemoryStats before = memory_stats();
    { Tensor small = block(16 * kPage); } // 64 KiB
    CHECK(memory_stats().cached == before.cached);
    CHECK(memory_stats().hits == before.hits);
    CHECK(memory_stats().misses == before.misses);
}

TEST_CASE("fresh memory first releases the oldest kept buffers, down to the high-water mark", "[storage]") {
    empty_cache();
    REQUIRE(memory_stats().allocated == 0); // no large tensor alive in this program
    // Two buffers larger than anything earlier: their sum is the new peak.
    const size_t unit = (memory_stats().peak_allocated / kPage + 256) * kPage;
    Tensor a = block(unit), b = block(unit);
    REQUIRE(memory_stats().peak_allocated == 2 * unit);
    const void* kept = address(b);
    a = Tensor(); // released first: the oldest
    b = Tensor();
    REQUIRE(memory_stats().cached == 2 * unit);

    // A new size: 2 units kept + half a unit asked would pass the peak, so
    // the oldest (a's) goes back to the system and b's stays.
    Tensor c = block(unit / 2 / kPage * kPage);
    CHECK(memory_stats().cached == unit);
    CHECK(memory_stats().peak_allocated == 2 * unit);
    Tensor d = block(unit);
    CHECK(address(d) == kept);
    CHECK(memory_stats().cached == 0);

    c = Tensor();
    d = Tensor();
    empty_cache();
    CHECK(memory_stats().cached == 0);
    CHECK(memory_stats().allocated == 0);
}

TEST_CASE("under any pattern of sizes, live plus kept memory stays within the peak", "[storage]") {
    empty_cache();
    std::mt19937 rng(7);
    std::uniform_int_distribution<size_t> pages(64, 4096); // 256 KiB to 16 MiB
    std::vector<Tensor> live;
    size_t hits = memory_stats().hits;
    for (int step = 0; step < 400; ++step) {
        if (!live.empty() && rng() % 2 == 0) {
            live.erase(live.begin() + static_cast<long>(rng() % live.size()));
        } else {
            // Half the requests repeat one of a few sizes, as a training loop does.
            const size_t n = rng() % 2 ? pages(rng) : 64u << (rng() % 6);
            live.push_back(block(n * kPage));
        }
        const MemoryStats s = memory_stats();
        REQUIRE(s.allocated + s.cached <= s.peak_allocated);
    }
    CHECK(memory_stats().hits > hits); // the repeated sizes were served from the cache
    live.clear();
    empty_cache();
}
