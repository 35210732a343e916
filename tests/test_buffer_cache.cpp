// The buffer cache behind Storage when the fast kernels are built
// (core/kernels/buffer_cache.cpp): released buffers come back for a request
// of the same size class (whole pages from 256 KiB, four classes per
// doubling below), and the cache never holds the process above 1.5 times
// the most memory its tensors ever used at once. Built only with the fast kernels
// (a reference build has no cache: tests/meson.build).
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "check.h"

using namespace ember;

namespace {

using testing::block;
using testing::kPage;

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

TEST_CASE("a small buffer serves the next request of its size class", "[storage]") {
    empty_cache();
    // 1000 and 1020 bytes both fall in the class of 1024 (897 to 1024).
    Tensor a = empty({250});
    const void* first = address(a);
    const MemoryStats before = memory_stats();
    a = Tensor();
    CHECK(memory_stats().cached == before.cached + 1024);
    Tensor b = empty({255});
    CHECK(address(b) == first);
    CHECK(memory_stats().hits == before.hits + 1);
    CHECK(memory_stats().cached == before.cached);
    b = Tensor();
    // 1028 bytes is the next class up (1025 to 1280): a fresh buffer.
    Tensor c = empty({257});
    CHECK(address(c) != first);
    CHECK(memory_stats().misses == before.misses + 1);
    CHECK(memory_stats().allocated == before.allocated + 1280 - 1024);
}

TEST_CASE("a buffer is at most a quarter larger than asked below 256 KiB, whole pages from there", "[storage]") {
    empty_cache();
    for (int64_t floats = 1; floats <= (int64_t{1} << 17); floats += 1 + floats / 7) {
        const size_t asked = static_cast<size_t>(floats) * sizeof(float);
        const size_t live = memory_stats().allocated;
        Tensor t = empty({floats});
        const size_t got = memory_stats().allocated - live;
        INFO(asked << " bytes asked, a buffer of " << got);
        CHECK(got >= asked);
        if (asked >= (size_t{1} << 18)) CHECK(got == (asked + kPage - 1) / kPage * kPage);
        else if (asked > 64) CHECK(got * 4 <= asked * 5);
        else CHECK(got == 64);
    }
    empty_cache();
}

TEST_CASE("fresh memory first releases the oldest kept buffers, down to 1.5 times the high-water mark", "[storage]") {
    reset_peak_memory_stats(); // the peak is what lives now (tensors other tests keep in statics)
    const size_t live = memory_stats().allocated;
    // Two buffers larger than anything living: with what lives, the new peak.
    const size_t unit = (live / kPage + 256) * kPage;
    Tensor a = block(unit), b = block(unit);
    const size_t peak = live + 2 * unit;
    REQUIRE(memory_stats().peak_allocated == peak);
    const void* kept = address(b);
    a = Tensor(); // released first: the oldest
    b = Tensor();
    REQUIRE(memory_stats().cached == 2 * unit);
    // What a request may take beside both kept buffers: live + kept + it
    // stays within 1.5 times the peak (unit + live / 2, in whole pages).
    const size_t room = (peak + peak / 2 - live - 2 * unit) / kPage * kPage;

    SECTION("a new size with room beside them: fresh memory, nothing released") {
        Tensor c = block(room / 2 / kPage * kPage);
        CHECK(memory_stats().cached == 2 * unit);
    }
    SECTION("one page past the room: the oldest (a's) goes back to the system, b's stays") {
        Tensor c = block(room + kPage);
        CHECK(memory_stats().cached == unit);
        CHECK(memory_stats().peak_allocated == peak);
        Tensor d = block(unit);
        CHECK(address(d) == kept);
        CHECK(memory_stats().cached == 0);
    }
    empty_cache();
    CHECK(memory_stats().cached == 0);
    CHECK(memory_stats().allocated == live);
}

TEST_CASE("a loop whose live sizes change their mix runs from the cache after its first pass", "[storage]") {
    // A training step's shape of memory: the forward pass ends holding four
    // wide activations (the peak); the backward pass holds four gradients
    // of half their size, fewer bytes in buffers of another size. Under a
    // bound at the peak itself, each backward pass gave back wide buffers
    // that the next forward pass asked for again: a miss every pass.
    reset_peak_memory_stats();
    const size_t unit = (memory_stats().allocated / kPage / 4 + 64) * kPage;
    auto pass = [&] {
        std::vector<Tensor> wide, narrow;
        for (int i = 0; i < 4; ++i) wide.push_back(block(4 * unit));
        wide.clear();
        for (int i = 0; i < 4; ++i) narrow.push_back(block(2 * unit));
    };
    pass();
    const MemoryStats first = memory_stats();
    for (int i = 0; i < 5; ++i) pass();
    const MemoryStats after = memory_stats();
    CHECK(after.misses == first.misses);
    CHECK(after.hits == first.hits + 5 * 8);
    CHECK(after.allocated + after.cached <= after.peak_allocated + after.peak_allocated / 2);
    empty_cache();
}

TEST_CASE("under any pattern of sizes, live plus kept memory stays within 1.5 times the peak", "[storage]") {
    empty_cache();
    std::mt19937 rng(7);
    std::uniform_int_distribution<size_t> pages(64, 4096);  // 256 KiB to 16 MiB
    std::uniform_int_distribution<size_t> bytes(4, 200000); // small classes
    std::vector<Tensor> live;
    size_t hits = memory_stats().hits;
    for (int step = 0; step < 400; ++step) {
        if (!live.empty() && rng() % 2 == 0) {
            live.erase(live.begin() + static_cast<long>(rng() % live.size()));
        } else {
            // A third of the requests repeat one of a few sizes, as a training
            // loop does; the others are large or small sizes at random.
            switch (rng() % 3) {
            case 0: live.push_back(block((64u << (rng() % 6)) * kPage)); break;
            case 1: live.push_back(block(pages(rng) * kPage)); break;
            default: live.push_back(empty({static_cast<int64_t>(bytes(rng) / 4)})); break;
            }
        }
        const MemoryStats s = memory_stats();
        REQUIRE(s.allocated + s.cached <= s.peak_allocated + s.peak_allocated / 2);
    }
    CHECK(memory_stats().hits > hits); // the repeated sizes were served from the cache
    live.clear();
    empty_cache();
}
