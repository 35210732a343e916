// The library's precompiled header (meson.build, cpp_pch): the standard
// headers that ember's files include, parsed once per build rather than
// once per file, which was most of a file's compile time. It is only a
// build speed-up: every file still includes what it uses, and .ci/run's
// thread-sanitizer build compiles without it (-Db_pch=false) to prove so.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>
