/* How far apart two CPUs are: the round trip of one cache line between a
 * thread pinned to each, in nanoseconds.
 *
 *     build/bench/core_round_trip          # CPUs 0 and 1
 *     build/bench/core_round_trip 0 3
 *
 * The threads take turns writing a counter that the other waits for, so
 * each turn moves the line from one core's cache to the other's and back.
 * Two cores that share a cache take tens of nanoseconds; on a virtual
 * machine the host may place two virtual CPUs far apart (on other chips
 * of the package, or other sockets), and then a round trip takes hundreds.
 * Every parallel loop of ember hands data between its threads this way,
 * so two threads train much slower while their CPUs are far apart
 * (docs/performance.md, "Two threads, and where the host puts them").
 * Prints one JSON line, the median of 9 rounds. Linux only. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kTurns = 100000, kRounds = 9 };

/* The line the two threads pass back and forth, alone in its 64 bytes:
 * 0 until the second thread is up, then 1 (or -1: it could not run on its
 * CPU), then 2i and 2i + 1 for turn i. */
static struct {
    _Alignas(64) atomic_long value;
    char rest[64 - sizeof(atomic_long)];
} turn;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The second thread: says whether it runs where it should, then answers
 * each turn 2i with 2i + 1. */
static void* answer(void* arg) {
    if (pin(*(const int*)arg) != 0) {
        atomic_store(&turn.value, -1);
        return NULL;
    }
    atomic_store(&turn.value, 1);
    for (long i = 1; i <= kTurns; ++i) {
        while (atomic_load_explicit(&turn.value, memory_order_acquire) != 2 * i) {
        }
        atomic_store_explicit(&turn.value, 2 * i + 1, memory_order_release);
    }
    return NULL;
}

/* A CPU number, or -1. */
static int cpu_of(const char* text) {
    char* end;
    const long cpu = strtol(text, &end, 10);
    return *text != '\0' && *end == '\0' && cpu >= 0 && cpu < CPU_SETSIZE ? (int)cpu : -1;
}

static int compare(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(int argc, char** argv) {
    int cpus[2] = {0, 1};
    if (argc == 3) cpus[0] = cpu_of(argv[1]), cpus[1] = cpu_of(argv[2]);
    if ((argc != 1 && argc != 3) || cpus[0] < 0 || cpus[1] < 0) {
        fprintf(stderr, "usage: core_round_trip [CPU CPU]\n");
        return 2;
    }
    if (cpus[0] == cpus[1]) { /* two spinning threads on one CPU would take turns at the scheduler's pace */
        fprintf(stderr, "core_round_trip: two different CPUs, please\n");
        return 2;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
    for (int i = 0; i < 2; ++i)
        if (!CPU_ISSET(cpus[i], &allowed)) {
            fprintf(stderr, "core_round_trip: cannot run on CPU %d\n", cpus[i]);
            return 1;
        }
    if (pin(cpus[0]) != 0) return 1;
    double ns[kRounds];
    for (int r = 0; r < kRounds; ++r) {
        atomic_store(&turn.value, 0);
        pthread_t other;
        if (pthread_create(&other, NULL, answer, &cpus[1]) != 0) return 1;
        long ready; /* the clock starts once the other thread is up and pinned */
        while ((ready = atomic_load(&turn.value)) == 0) {
        }
        const double start = now();
        for (long i = 1; ready == 1 && i <= kTurns; ++i) {
            atomic_store_explicit(&turn.value, 2 * i, memory_order_release);
            while (atomic_load_explicit(&turn.value, memory_order_acquire) != 2 * i + 1) {
            }
        }
        ns[r] = (now() - start) / kTurns * 1e9;
        pthread_join(other, NULL);
        if (ready != 1) {
            fprintf(stderr, "core_round_trip: cannot run on CPU %d\n", cpus[1]);
            return 1;
        }
    }
    qsort(ns, kRounds, sizeof ns[0], compare);
    printf("{\"name\":\"core_round_trip\",\"cpus\":[%d,%d],\"ns\":%.0f}\n", cpus[0], cpus[1], ns[kRounds / 2]);
    return 0;
}
