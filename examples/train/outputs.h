// The files a train_gpt run writes, made safe before its first step: the
// output folder is locked (one run writes it at a time, and a second is told
// who holds it); a new run does not start over a checkpoint already there
// unless --overwrite says so; no output may be one of the run's inputs (the
// data, the checkpoint it resumes from) or another output; every output's
// folder takes a new file now, not hours later; and the temporary files of
// saves a kill interrupted are removed. Each refusal is an InputError (exit
// status 2). Tests: tests/test_train_gpt.cpp ("a user's files"); docs:
// docs/training.md ("What happens to your checkpoints").
#pragma once

#include <string>
#include <vector>

namespace train {

// An exclusive lock on a folder, held from lock_folder() until destroyed
// (or the process ends, however it ends: the system drops the lock).
class FolderLock {
public:
    FolderLock() = default;
    FolderLock(const FolderLock&) = delete;
    FolderLock& operator=(const FolderLock&) = delete;
    FolderLock(FolderLock&& other) noexcept;
    FolderLock& operator=(FolderLock&& other) noexcept;
    ~FolderLock();

private:
    friend FolderLock lock_folder(const std::string& dir);
    int fd_ = -1;
};

// Locks `dir` through its file .train_gpt.lock, which holds the holder's
// process id and start time. Throws InputError naming the holder (and its
// command line, where the system shows it) if another process holds it.
FolderLock lock_folder(const std::string& dir);

// Throws InputError unless a new file can be created beside `path` (in its
// folder, which must exist) and `path` itself is not a folder. `flag` names
// where the path came from ("--attention-map").
void check_writable(const std::string& path, const std::string& flag);

// A file the run reads or writes, and the flag (or description) it came from.
struct RunFile {
    std::string path, flag;
};

// Throws InputError if an output is one of the inputs or names the same file
// as another output (by path, after resolving links and "..").
void refuse_overlaps(const std::vector<RunFile>& outputs, const std::vector<RunFile>& inputs);

// Removes the temporary files (NAME.tmp.XXXXXX, and NAME.tmp of older
// versions) that interrupted writes of `outputs` left beside them; only
// regular files, never what a link points to. Returns how many it removed.
int remove_orphans(const std::vector<RunFile>& outputs);

} // namespace train
