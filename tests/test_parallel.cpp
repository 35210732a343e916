// The adaptive thread policy of Note [Threads on a busy machine]
// (core/loops/parallel.h), driven with made-up clocks, parallel_for's
// chunks, and parallel_team's shares, barriers and errors (Note [A team of
// threads]). Bench: bench/busy.py measures the policy on a busy machine.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "check.h"
#include "ember.h"

using namespace ember;
using internal::ThreadPolicy;
using testing::TwoThreads;

namespace {

constexpr int64_t kMs = 1'000'000;

// Feeds `policy` split loops of `wall` ns that would cost `serial` ns on one
// thread, ending at `now`, until one window (5 ms of wall time) is judged.
// Returns the time after the last loop.
int64_t feed_window(ThreadPolicy& policy, int64_t now, int64_t wall, int64_t serial) {
    for (int64_t spent = 0; spent < ThreadPolicy::kWindowNs; spent += wall) {
        now += wall;
        policy.record(now, wall, serial);
    }
    return now;
}

} // namespace

TEST_CASE("loops that pay for their threads keep splitting", "[parallel]") {
    ThreadPolicy policy;
    int64_t now = 0;
    policy.record(now, 10 * kMs, 0); // the first loop also starts the threads: not judged
    for (int window = 0; window < 10; ++window) now = feed_window(policy, now, kMs / 2, kMs);
    CHECK(policy.may_split(now));
    CHECK(policy.serial_stretches() == 0);
}

TEST_CASE("loops that cost more split than serial go serial, longer while it lasts", "[parallel]") {
    ThreadPolicy policy;
    int64_t now = 0;
    policy.record(now, 0, 0); // the warm-up loop
    // Two threads, one of them waiting for a core: 3 ms for 1 ms of work.
    now = feed_window(policy, now, 3 * kMs, kMs);
    CHECK(policy.serial_stretches() == 1);
    CHECK_FALSE(policy.may_split(now));
    CHECK_FALSE(policy.may_split(now + ThreadPolicy::kFirstSerialNs - 1));
    CHECK(policy.may_split(now + ThreadPolicy::kFirstSerialNs));

    // Still busy when it looks again: the warm-up loop is skipped, then the
    // next window goes serial for twice as long.
    now += ThreadPolicy::kFirstSerialNs;
    policy.record(now, 50 * kMs, kMs);
    CHECK(policy.may_split(now));
    now = feed_window(policy, now, 3 * kMs, kMs);
    CHECK(policy.serial_stretches() == 2);
    CHECK_FALSE(policy.may_split(now + 2 * ThreadPolicy::kFirstSerialNs - 1));
    CHECK(policy.may_split(now + 2 * ThreadPolicy::kFirstSerialNs));

    // The stretches double up to the longest.
    for (int i = 0; i < 20; ++i) {
        now += ThreadPolicy::kLongestSerialNs;
        policy.record(now, 0, 0);
        now = feed_window(policy, now, 3 * kMs, kMs);
    }
    CHECK_FALSE(policy.may_split(now + ThreadPolicy::kLongestSerialNs - 1));
    CHECK(policy.may_split(now + ThreadPolicy::kLongestSerialNs));

    // The machine is free again: one good window, and the next bad one
    // waits only the first stretch.
    now += ThreadPolicy::kLongestSerialNs;
    policy.record(now, 0, 0);
    now = feed_window(policy, now, kMs, 2 * kMs);
    CHECK(policy.may_split(now));
    now = feed_window(policy, now, 3 * kMs, kMs);
    CHECK_FALSE(policy.may_split(now));
    CHECK(policy.may_split(now + ThreadPolicy::kFirstSerialNs));
}

TEST_CASE("one slow loop among many fast ones is not judged alone", "[parallel]") {
    ThreadPolicy policy;
    int64_t now = 0;
    policy.record(now, 0, 0);
    // A 3 ms hiccup (a thread woken late) inside a window of loops that pay.
    now += 3 * kMs;
    policy.record(now, 3 * kMs, kMs / 10);
    now = feed_window(policy, now, kMs / 10, kMs);
    CHECK(policy.may_split(now));
    CHECK(policy.serial_stretches() == 0);
}

TEST_CASE("set_adaptive_threads(false) splits whatever the policy says", "[parallel]") {
    const bool before = adaptive_threads();
    // Loops that lost, reported as if they ended 10 s from now: the policy is
    // serial from now until then and 20 ms more, however slow this machine.
    const int64_t later = internal::steady_ns() + 10'000 * kMs;
    ThreadPolicy& policy = internal::thread_policy();
    policy.record(later, 0, 0);
    feed_window(policy, later, 3 * kMs, kMs);
    set_adaptive_threads(true);
    CHECK(adaptive_threads());
    CHECK_FALSE(internal::may_split());
    set_adaptive_threads(false);
    CHECK_FALSE(adaptive_threads());
    CHECK(internal::may_split());
    set_adaptive_threads(before);
}

TEST_CASE("parallel_for covers the range once, in or out of the serial stretch", "[parallel]") {
    const int threads = get_num_threads();
    set_num_threads(std::min(2, max_num_threads()));
    for (bool adaptive : {false, true}) {
        set_adaptive_threads(adaptive);
        std::vector<int> hits(100000, 0);
        parallel_for(0, static_cast<int64_t>(hits.size()), 1, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)] += 1;
        });
        CHECK(std::count(hits.begin(), hits.end(), 1) == static_cast<long>(hits.size()));
    }
    set_adaptive_threads(false);
    set_num_threads(threads);
}

TEST_CASE("a WorkRange hands out halves of what is left, from either end, each item once", "[parallel]") {
    // Note [Taking work from the other end]: the owner takes half of what
    // is left from the front, another thread half from the back, at least
    // `least` items (or what is left).
    WorkRange range(10, 30); // 20 items
    WorkRange::Range piece{};
    REQUIRE(range.take_front(1, piece));
    CHECK((piece.begin == 10 && piece.end == 20));
    REQUIRE(range.take_back(1, piece));
    CHECK((piece.begin == 25 && piece.end == 30));
    REQUIRE(range.take_front(4, piece)); // half of 5 is 3, but at least 4
    CHECK((piece.begin == 20 && piece.end == 24));
    REQUIRE(range.take_back(4, piece)); // one left
    CHECK((piece.begin == 24 && piece.end == 25));
    CHECK_FALSE(range.take_front(1, piece));
    CHECK_FALSE(range.take_back(1, piece));
    WorkRange empty_range(7, 7);
    CHECK_FALSE(empty_range.take_front(1, piece));

    // Two threads taking from the two ends at once: every item once.
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<int> hits(1000, 0);
        WorkRange shared(0, 1000);
        std::thread other([&] {
            WorkRange::Range p;
            while (shared.take_back(1, p))
                for (int64_t i = p.begin; i < p.end; ++i) hits[static_cast<size_t>(i)] += 1;
        });
        while (shared.take_front(1, piece))
            for (int64_t i = piece.begin; i < piece.end; ++i) hits[static_cast<size_t>(i)] += 1;
        other.join();
        REQUIRE(std::count(hits.begin(), hits.end(), 1) == 1000);
    }
}

TEST_CASE("parallel_for_balanced covers the range once, and a thread that is done takes the other's end",
          "[parallel]") {
    TwoThreads two;
    if (get_num_threads() < 2) {
        WARN("skipped: one thread only (a build without OpenMP)");
        return;
    }
    // Items [0, 100): thread 0's chunk [0, 50), thread 1's [50, 100). Thread
    // 1, in its first piece, waits until thread 0 has done an item of
    // thread 1's chunk (at most 10 s), which thread 0 can only take from
    // that chunk's end once its own chunk is done.
    std::vector<int> hits(100, 0), by(100, -1);
    const std::thread::id caller = std::this_thread::get_id(); // OpenMP's thread 0
    std::atomic<bool> waited{false}, took{false};
    parallel_for_balanced(0, 100, 1, 1, [&](int64_t b, int64_t e) {
        const int thread = std::this_thread::get_id() == caller ? 0 : 1;
        if (thread == 0 && b >= 50) took = true;
        if (thread == 1 && !waited.exchange(true))
            for (int ms = 0; ms < 10000 && !took; ++ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (int64_t i = b; i < e; ++i) {
            hits[static_cast<size_t>(i)] += 1;
            by[static_cast<size_t>(i)] = thread;
        }
    });
    CHECK(std::count(hits.begin(), hits.end(), 1) == 100);
    CHECK(std::count(by.begin(), by.begin() + 50, 0) == 50);
    CHECK(took);
    CHECK(by[99] == 0); // the end of thread 1's chunk, taken by thread 0
    // Serially (inside a parallel loop): every item once, in order.
    std::vector<int64_t> order;
    parallel_for(0, 2, 1, [&](int64_t b, int64_t) {
        if (b == 0)
            parallel_for_balanced(0, 100, 1, 1, [&](int64_t pb, int64_t pe) {
                for (int64_t i = pb; i < pe; ++i) order.push_back(i);
            });
    });
    REQUIRE(order.size() == 100);
    for (int64_t i = 0; i < 100; ++i) CHECK(order[static_cast<size_t>(i)] == i);
}

TEST_CASE("parallel_team's shares cover a range once, and a barrier waits for every thread", "[parallel]") {
    TwoThreads two;
    const int64_t n = 1001;
    std::vector<int> written(n, 0);
    std::vector<int64_t> seen(8, -1); // per thread: how many elements it saw written after the barrier
    int64_t team_size = 0;
    parallel_team(true, [&](Team& team) {
        team.run([&] {
            if (team.thread() == team.threads() - 1) // the last thread writes late
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            const auto [begin, end] = team.share(0, n);
            for (int64_t i = begin; i < end; ++i) written[static_cast<size_t>(i)] += 1;
        });
        team.barrier();
        team.run([&] {
            seen[static_cast<size_t>(team.thread())] = std::count(written.begin(), written.end(), 1);
            if (team.thread() == 0) team_size = team.threads();
        });
    });
#ifdef _OPENMP
    CHECK(team_size == std::min(2, max_num_threads()));
#else
    CHECK(team_size == 1);
#endif
    CHECK(std::count(written.begin(), written.end(), 1) == n);
    for (int64_t t = 0; t < team_size; ++t) CHECK(seen[static_cast<size_t>(t)] == n);
}

TEST_CASE("parallel_team runs alone on the calling thread when told not to split", "[parallel]") {
    TwoThreads two;
    int64_t calls = 0, size = 0;
    Team::Range all{-1, -1};
    parallel_team(false, [&](Team& team) {
        ++calls;
        size = team.threads();
        all = team.share(3, 10);
        team.barrier(); // a barrier of one returns at once
    });
    CHECK(calls == 1);
    CHECK(size == 1);
    CHECK(all.begin == 3);
    CHECK(all.end == 10);
}

TEST_CASE("a step that throws in one thread skips the later steps and is rethrown, with no thread stuck",
          "[parallel]") {
    TwoThreads two;
    for (bool split : {true, false}) {
        std::atomic<int> later_steps{0};
        auto team_work = [&](Team& team) {
            team.run([&] {
                if (team.thread() == 0) throw std::length_error("step one failed");
            });
            team.barrier(); // every thread, the one that threw too, must get here
            team.run([&] { later_steps.fetch_add(1); });
            team.barrier();
        };
        CHECK_THROWS_AS(parallel_team(split, team_work), std::length_error);
        CHECK(later_steps.load() == 0);
    }
}

TEST_CASE("a part's guard marks it done on the way out, by a throw too, and the other thread waits for it",
          "[parallel]") {
    TwoThreads two;
    // Thread 0 writes a value under a guard, then throws; thread 1 waits for
    // the part and must see the value. parallel_for rethrows the throw.
    // (Without OpenMP both chunks run in turn on this thread, and a throw
    // in the first leaves the second undone.)
    for (bool throws : {false, true}) {
        PartDone part;
        int written = 0, seen = -1;
        bool split = false;
        auto two_chunks = [&] {
            parallel_for(0, 2, 1, [&](int64_t begin, int64_t end) {
                if (begin == 0) {
                    split = end == 1;
                    PartDone::Guard guard(part);
                    written = 42;
                    if (throws) throw std::runtime_error("part failed");
                }
                if (end == 2) {
                    part.wait();
                    seen = written;
                }
            });
        };
        if (throws) CHECK_THROWS_AS(two_chunks(), std::runtime_error);
        else two_chunks();
        if (split || !throws) CHECK(seen == 42);
    }
}
