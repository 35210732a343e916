// Storage (core/tensor/storage.cpp), in every build: a tensor the machine
// cannot hold is an OutOfMemoryError naming the op and the size, never a
// std::bad_alloc or an abort; memory_stats counts what tensors hold and the
// peak; human_bytes. The buffer cache of the fast kernels:
// tests/test_buffer_cache.cpp.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "check.h"

using namespace ember;

using testing::block;
using testing::kPage;

// AddressSanitizer aborts on an allocation larger than it supports unless
// told to return null, which is what ember's allocator checks for (the
// sanitizer build runs this file too).
#if defined(EMBER_ASAN)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

TEST_CASE("a tensor too large for the machine is an OutOfMemoryError naming the op and the size", "[storage][errors]") {
    // Each result needs 2^48 bytes or more: past any x86-64 address space, so
    // the allocation fails however the system overcommits memory. The inputs
    // are expanded views of one element: they cost nothing.
    const MemoryStats before = memory_stats();
    auto expanded = [](Shape shape) { return ones(Shape(shape.size(), 1)).expand(shape); };
    auto require_oom = [](const std::function<Tensor()>& op, const std::string& name, const std::string& bytes) {
        try {
            op();
            FAIL("no error for " << name);
        } catch (const OutOfMemoryError& e) {
            INFO(e.what());
            CHECK(std::string(e.what()).rfind("[" + name + "] out of memory", 0) == 0);
            CHECK(std::string(e.what()).find("(" + bytes + " bytes)") != std::string::npos);
        }
    };
    require_oom([] { return zeros({int64_t{1} << 30, int64_t{1} << 29}); }, "zeros", "2305843009213693952");
    require_oom([] { return empty({int64_t{1} << 47}, kFloat64); }, "empty", "1125899906842624");
    require_oom(
        [&] {
            return expanded({int64_t{1} << 30, 1}) + expanded({1, int64_t{1} << 29});
        },
        "add", "2305843009213693952");
    require_oom(
        [&] {
            return matmul(expanded({int64_t{1} << 23, 1, 1, 1}), expanded({1, int64_t{1} << 23, 1, 1}));
        },
        "matmul", "281474976710656");
    require_oom([&] { return expanded({int64_t{1} << 59}).contiguous(); }, "clone", "2305843009213693952");
    require_oom([&] { return softmax(expanded({int64_t{1} << 50}), 0); }, "contiguous", "4503599627370496");
    // Nothing leaked into the cache's books, and allocation still works.
    CHECK(memory_stats().allocated == before.allocated);
    CHECK(zeros({3}).sum().item<float>() == 0);
}

TEST_CASE("reset_peak_memory_stats starts the peak again from what lives", "[storage]") {
    Tensor keep = block(64 * kPage);
    { Tensor big = block(4096 * kPage); } // 16 MiB, released (into the cache, where there is one)
    reset_peak_memory_stats();
    MemoryStats s = memory_stats();
    CHECK(s.cached == 0);
    CHECK(s.peak_allocated == s.allocated);
    Tensor more = block(128 * kPage);
    CHECK(memory_stats().peak_allocated == s.allocated + 128 * kPage);
}

TEST_CASE("memory_stats counts a tensor's buffer while it lives", "[storage]") {
    const size_t before = memory_stats().allocated;
    {
        Tensor t = block(256 * kPage); // 1 MiB: a whole number of pages in either build
        CHECK(memory_stats().allocated == before + 256 * kPage);
        CHECK(memory_stats().peak_allocated >= before + 256 * kPage);
    }
    CHECK(memory_stats().allocated == before);
}

TEST_CASE("human_bytes prints a size in binary units", "[storage]") {
    CHECK(human_bytes(0) == "0 bytes");
    CHECK(human_bytes(1023) == "1023 bytes");
    CHECK(human_bytes(1536) == "1.5 KiB");          // 1536 / 1024
    CHECK(human_bytes(3 * 1048576.0) == "3.0 MiB"); // 3 * 2^20
    CHECK(human_bytes(0x1p61) == "2.0 EiB");        // 2^61 / 2^60
    CHECK(human_bytes(0x1p80) == "1.0 YiB");        // 2^80
}
