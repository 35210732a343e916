// Locking the output folder and checking what a run will write: see outputs.h.
#include "outputs.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "core/tensor/platform.h"
#include "data.h"

namespace train {

namespace fs = std::filesystem;

FolderLock::FolderLock(FolderLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = other.fd_;
        other.fd_ = -1;
    }
    return *this;
}

FolderLock::~FolderLock() {
    if (fd_ >= 0) ::close(fd_); // closing the file releases the lock
}

namespace {

// Who holds the lock, from its file: "process 123 (train_gpt --preset
// lecture), since 2026-11-26 12:00:00".
std::string holder(const std::string& lock_path) {
    std::ifstream in(lock_path);
    long pid = 0;
    std::string since;
    in >> pid;
    std::getline(in >> std::ws, since);
    if (pid <= 0) return "another process";
    std::string text = "process " + std::to_string(pid);
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string command, word;
    while (std::getline(cmdline, word, '\0')) command += (command.empty() ? "" : " ") + word;
    if (!command.empty()) text += " (" + command + ")";
    return since.empty() ? text : text + ", since " + since;
}

} // namespace

FolderLock lock_folder(const std::string& dir) {
    const std::string path = dir + "/.train_gpt.lock";
    FolderLock lock;
    lock.fd_ = ember::internal::open_lock_file(path);
    if (lock.fd_ < 0) throw InputError("--out " + dir + ": cannot create its lock file: " + std::strerror(errno));
    // The lock is on the open file (flock; LockFileEx on Windows): the system
    // drops it when the process ends, even by kill -9, so a lock is never
    // left behind by a dead run.
    if (!ember::internal::try_lock(lock.fd_)) {
        const int error = errno;
        if (error != EWOULDBLOCK) throw InputError("--out " + dir + ": cannot lock it: " + std::strerror(error));
        throw InputError("--out " + dir + " is in use by another train_gpt run: " + holder(path) +
                         ". Wait for it to finish, stop it, or choose another --out");
    }
    char since[32] = "";
    const std::time_t now = std::time(nullptr);
    std::strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
    const std::string text = std::to_string(ember::internal::process_id()) + " " + since + "\n";
    // Who holds it, for a second run's message: best effort (the lock holds
    // without it, and a full disk must not stop the run here).
    if (::ftruncate(lock.fd_, 0) == 0 && ::write(lock.fd_, text.data(), text.size()) < 0) {
        // nothing to do: the holder will be named "another process"
    }
    return lock;
}

void check_writable(const std::string& path, const std::string& flag) {
    std::error_code error;
    if (fs::is_directory(path, error)) throw InputError(flag + " " + path + " is a folder; give a file name");
    const fs::path parent = fs::path(path).parent_path();
    const std::string folder = parent.empty() ? "." : parent.string();
    // The test is the act: create a file beside it (exclusively, under a
    // name no one else uses) and remove it again.
    std::string probe = (fs::path(folder) / ".train_gpt.probe.XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0)
        throw InputError(flag + " " + path + ": cannot write in " + folder + ": " + std::strerror(errno) +
                         " (checked before training, so no work is lost)");
    ::close(fd);
    ::unlink(probe.c_str());
}

namespace {

// The path as the system resolves it (links, ".", ".."), for files that may
// not exist yet: their folder resolved, then the name.
fs::path resolved(const std::string& path) {
    std::error_code error;
    fs::path p = fs::weakly_canonical(fs::absolute(path, error), error);
    return error ? fs::absolute(path).lexically_normal() : p;
}

} // namespace

void refuse_overlaps(const std::vector<RunFile>& outputs, const std::vector<RunFile>& inputs) {
    for (size_t i = 0; i < outputs.size(); ++i) {
        const fs::path out = resolved(outputs[i].path);
        for (const RunFile& in : inputs)
            if (!in.path.empty() && out == resolved(in.path))
                throw InputError(outputs[i].flag + " " + outputs[i].path + " is the file " + in.flag +
                                 " reads; writing it would destroy it. Choose another name");
        for (size_t j = 0; j < i; ++j)
            if (out == resolved(outputs[j].path))
                throw InputError(outputs[i].flag + " " + outputs[i].path + " is also " + outputs[j].flag +
                                 "; each output needs a file of its own");
    }
}

int remove_orphans(const std::vector<RunFile>& outputs) {
    int removed = 0;
    for (const RunFile& output : outputs) {
        const fs::path target(output.path);
        const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
        const std::string stem = target.filename().string() + ".tmp";
        std::error_code error;
        for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
            const std::string name = entry.path().filename().string();
            // NAME.tmp.XXXXXX: mkstemp's six characters; NAME.tmp: older versions' fixed name.
            const bool ours = name == stem || (name.size() == stem.size() + 7 && name.rfind(stem + ".", 0) == 0);
            std::error_code kind_error;
            if (ours && entry.is_regular_file(kind_error) && !entry.is_symlink(kind_error) &&
                fs::remove(entry.path(), kind_error))
                ++removed;
        }
    }
    return removed;
}

} // namespace train
