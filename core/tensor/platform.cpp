// What ember asks of the operating system (platform.h has the contract):
// each function has its POSIX branch and its Windows branch (MinGW-w64)
// side by side, and nothing else of the library includes a system header.
// Tests: tests/test_storage.cpp, tests/test_safetensors.cpp, tests/test_svg.cpp.
#include "core/tensor/platform.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#ifndef NOMINMAX // libstdc++ defines it on MinGW: windows.h must not define min and max
#define NOMINMAX
#endif
#include <io.h>
#include <windows.h>
#else
#include <sys/file.h>
#include <sys/mman.h>
#endif

namespace ember::internal {

// ---- memory ----------------------------------------------------------------------------------

void* allocate_pages(size_t bytes) {
#ifdef _WIN32
    // Reserved and committed at once; VirtualAlloc returns null on failure.
    return ::VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
#else
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
#endif
}

void release_pages(void* p, size_t bytes) {
#ifdef _WIN32
    (void)bytes; // MEM_RELEASE frees the whole reservation, whose size Windows knows
    ::VirtualFree(p, 0, MEM_RELEASE);
#else
    ::munmap(p, bytes);
#endif
}

// ---- files -----------------------------------------------------------------------------------

namespace {

#ifndef _WIN32
// The permissions a file made by open() would get: 0666 less the umask
// (mkstemp makes 0600, which would hide ember's files from other users).
mode_t new_file_mode() {
    // umask can only be read by setting it; set it straight back.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    return 0666 & ~mask;
}
#endif

// Writes all of `bytes` to `fd`; false with errno set if it cannot.
bool write_all(int fd, std::string_view bytes) {
    const char* p = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
        // Windows's write takes an unsigned int count: pieces under 1 GiB suit both.
        const auto w = ::write(fd, p, static_cast<unsigned>(std::min<size_t>(left, size_t{1} << 30)));
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO; // no progress and no reason given
        if (w <= 0) return false;
        p += w;
        left -= static_cast<size_t>(w);
    }
    return true;
}

} // namespace

// mkstemp makes PATH.tmp.XXXXXX exclusively (MinGW-w64's in binary mode, so
// "\n" stays one byte); the data is flushed to the disk before the rename,
// since a full disk may show only then; the rename replaces `path` in one
// step. On Windows, rename() refuses to replace an existing file, so
// MoveFileEx does it, with MOVEFILE_REPLACE_EXISTING.
std::string write_file_whole(const std::string& path, const std::vector<std::string_view>& pieces) {
    std::string tmp = path + ".tmp.XXXXXX";
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) return "cannot create a file beside it: " + std::string(std::strerror(errno));
#ifndef _WIN32
    ::fchmod(fd, new_file_mode());
#endif
    bool ok = true;
    for (std::string_view piece : pieces) ok = ok && write_all(fd, piece);
    int error = ok ? 0 : errno;
#ifdef _WIN32
    if (error == 0 && ::_commit(fd) != 0) error = errno;
#else
    if (error == 0 && ::fsync(fd) != 0) error = errno;
#endif
    if (::close(fd) != 0 && error == 0) error = errno;
    std::string why = error != 0 ? std::strerror(error) : "";
#ifdef _WIN32
    if (why.empty() && !::MoveFileExA(tmp.c_str(), path.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
        why = std::system_category().message(static_cast<int>(::GetLastError()));
#else
    if (why.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) why = std::strerror(errno);
#endif
    if (why.empty()) return "";
    ::unlink(tmp.c_str());
    return why + " (the previous file, if any, is unchanged)";
}

int open_for_reading(const std::string& path) {
#ifdef _WIN32
    return ::_open(path.c_str(), _O_RDONLY | _O_BINARY | _O_NOINHERIT);
#else
    return ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
#endif
}

bool file_info(int fd, FileInfo& info) {
#ifdef _WIN32
    struct _stat64 s {}; // the 64-bit form: a plain stat's size is a 32-bit long there
    if (::_fstat64(fd, &s) != 0) return false;
    info.regular = (s.st_mode & _S_IFMT) == _S_IFREG;
    info.directory = (s.st_mode & _S_IFMT) == _S_IFDIR;
#else
    struct stat s {};
    if (::fstat(fd, &s) != 0) return false;
    info.regular = S_ISREG(s.st_mode);
    info.directory = S_ISDIR(s.st_mode);
#endif
    info.size = static_cast<uint64_t>(s.st_size);
    return true;
}

// ---- locks and processes ---------------------------------------------------------------------

int open_lock_file(const std::string& path) {
#ifdef _WIN32
    return ::_open(path.c_str(), _O_RDWR | _O_CREAT | _O_BINARY | _O_NOINHERIT, _S_IREAD | _S_IWRITE);
#else
    return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
#endif
}

bool try_lock(int fd) {
#ifdef _WIN32
    // Windows locks are mandatory: a locked byte cannot be read by anyone
    // else. The byte locked is 2^62, far past the end of the file, so the
    // process id written at its start stays readable by a second run.
    OVERLAPPED at{};
    at.OffsetHigh = 0x40000000u;
    const auto file = reinterpret_cast<HANDLE>(::_get_osfhandle(fd));
    if (::LockFileEx(file, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &at)) return true;
    errno = ::GetLastError() == ERROR_LOCK_VIOLATION ? EWOULDBLOCK : EACCES;
    return false;
#else
    return ::flock(fd, LOCK_EX | LOCK_NB) == 0;
#endif
}

int64_t process_id() {
#ifdef _WIN32
    return static_cast<int64_t>(::GetCurrentProcessId());
#else
    return ::getpid();
#endif
}

int64_t parent_process_id() {
#ifdef _WIN32
    return 0;
#else
    return ::getppid();
#endif
}

} // namespace ember::internal
