// What ember asks of the operating system, each with its POSIX way (Linux,
// macOS) and its Windows way side by side in platform.cpp, so that no other
// file of the library needs an #ifdef: memory straight from the system, a
// file written whole or not at all, a file opened for reading its bytes, a
// lock on a file, the process ids; and a float fused multiply-add that
// MinGW-w64's C library gets wrong. Private to ember (namespace
// ember::internal); train_gpt's pieces (examples/train/) use the lock and
// the ids. Tests: tests/test_storage.cpp (pages), tests/test_safetensors.cpp
// and tests/test_svg.cpp (writing over a file, a folder with a space).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::internal {

// ---- arithmetic ------------------------------------------------------------------------------

// a * b + c with one rounding, as std::fmaf promises. ember's random numbers
// reproduce PyTorch's bit for bit through it (core/random/normal.cpp), but
// MinGW-w64's fmaf rounds wrongly (a quarter of random triples came out one
// ulp off), so on Windows it is computed here: the product of two floats is
// exact in double (24 + 24 bits), the sum rounds once more, and TwoSum gives
// that rounding's error exactly; rounding the sum to odd (the neighbour
// with an odd last bit when it was inexact) and then to float is the correct
// rounding (Boldo and Melquiond, 2008: 53 >= 2 * 24 + 2 bits).
inline float fma_float(float a, float b, float c) {
#ifdef _WIN32
    const double product = double(a) * double(b);
    const double sum = product + double(c);
    if (!std::isfinite(sum)) return static_cast<float>(sum);
    const double c_part = sum - product;
    const double error = (product - (sum - c_part)) + (double(c) - c_part); // TwoSum: exact
    if (error == 0 || (std::bit_cast<uint64_t>(sum) & 1) != 0) return static_cast<float>(sum);
    return static_cast<float>(std::nextafter(sum, error > 0 ? HUGE_VAL : -HUGE_VAL));
#else
    return std::fmaf(a, b, c);
#endif
}

// a * b + c with one rounding, in double, as std::fma promises. MinGW-w64's
// fma is not always correctly rounded either (float64 normal_ came out one
// ulp off under Wine), so on Windows x86-64 it is the CPU's own FMA
// instruction (vfmadd, every x86-64 CPU since 2013), picked when the CPU
// has one; on an older CPU, MinGW's fma (which may be one ulp off).
#if defined(_WIN32) && defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("fma"))) inline double fma_double_instruction(double a, double b, double c) {
    return __builtin_fma(a, b, c); // one vfmadd231sd under target("fma")
}
inline double fma_double(double a, double b, double c) {
    static const bool has_fma = __builtin_cpu_supports("fma");
    return has_fma ? fma_double_instruction(a, b, c) : std::fma(a, b, c);
}
#else
inline double fma_double(double a, double b, double c) { return std::fma(a, b, c); }
#endif

// ---- memory ----------------------------------------------------------------------------------

// `bytes` of zeroed memory straight from the system (mmap; VirtualAlloc on
// Windows), page-aligned, or null when it has none to give. The buffer
// cache takes its large buffers here so that releasing one gives the memory
// back to the system at once (core/kernels/buffer_cache.cpp says why).
void* allocate_pages(size_t bytes);
// Gives back memory from allocate_pages; `bytes` is the size it was asked for.
void release_pages(void* p, size_t bytes);

// ---- files -----------------------------------------------------------------------------------

// Writes `pieces` one after another to a new temporary file beside `path`
// (PATH.tmp.XXXXXX, six characters chosen so that it is new: created
// exclusively, never through a link planted there, never shared by two
// writers), flushes it to disk, then renames it onto `path`, replacing the
// file there in one step (rename; MoveFileEx with MOVEFILE_REPLACE_EXISTING
// on Windows, where a plain rename refuses to replace), so a reader or a
// crash sees the old file or the new one, never half of one. Bytes go out
// as they are (no newline translation). Returns "" on success, else the
// system's reason and "(the previous file, if any, is unchanged)"; the
// temporary file is then removed.
std::string write_file_whole(const std::string& path, const std::vector<std::string_view>& pieces);

// Opens `path` for reading its bytes as they are (binary on Windows: no
// CRLF translation, no end at a Ctrl-Z), without waiting for a writer when
// it is a FIFO, and not inherited by programs this one starts. A file
// descriptor for ::read and ::close, or -1 with errno set.
int open_for_reading(const std::string& path);

// What an open file is, from the file itself (not its name, which a rename
// may have moved to another file meanwhile).
struct FileInfo {
    bool regular = false;   // a plain file
    bool directory = false; // a folder
    uint64_t size = 0;      // in bytes (64 bits on every system)
};
// False with errno set when the system cannot say.
bool file_info(int fd, FileInfo& info);

// ---- locks and processes ---------------------------------------------------------------------

// Opens `path` for reading and writing, creating it (never through a link,
// on POSIX): a file descriptor, or -1 with errno set.
int open_lock_file(const std::string& path);

// Locks the open file `fd` for this process alone, without waiting: true if
// it did, else false with errno set, EWOULDBLOCK when another process holds
// the lock. The lock holds until the descriptor is closed or the process
// ends, however it ends (flock; LockFileEx on Windows, on a byte far past
// the end of the file, so that other processes can still read what it holds).
bool try_lock(int fd);

// This process's id, and its parent's (0 where the system does not say: Windows).
int64_t process_id();
int64_t parent_process_id();

} // namespace ember::internal
