// The adaptive thread policy of Note [Threads on a busy machine]
// (core/loops/parallel.h), driven with made-up clocks, parallel_for's
// chunks, and parallel_team's shares, barriers and errors (Note [A team of
// threads]). Bench: bench/busy.py measures the policy on a busy machine.
#include <catch2/catch.hpp>

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
