// The Catch2 main shared by every test program (compiled once).
//
// Tests run with the adaptive thread policy off (Note [Threads on a busy
// machine] in core/loops/parallel.h): a test that compares one thread with
// two must run the split path, however busy the machine is. The policy's
// own cases in test_parallel.cpp drive a ThreadPolicy of their own, and the
// programs the tests start run with it on.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "core/loops/parallel.h"

int main(int argc, char* argv[]) {
    ember::set_adaptive_threads(false);
    return Catch::Session().run(argc, argv);
}
