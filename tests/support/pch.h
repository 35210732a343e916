// The precompiled header of the test programs (tests/meson.build): what
// nearly every test file includes, parsed once per program instead of once
// per file. A test file still includes what it uses itself.

#include <catch2/catch.hpp>

#include <ember.h>
