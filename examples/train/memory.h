// How much memory a training run will need, and how much the machine has,
// worked out before anything large is allocated: a configuration that cannot
// fit (train_gpt --n-embd 100000, --batch-size 100000000) is refused with
// both numbers instead of exhausting the machine. The estimate is an upper
// bound, fitted to ember's measured peaks (memory_stats().peak_allocated)
// and checked against them by tests/test_train_gpt.cpp; docs/training.md
// explains it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model.h"

namespace train {

// What a run needs, in bytes, by part.
struct MemoryEstimate {
    double parameters = 0;    // weights, gradients and AdamW's two moments: 16 bytes per parameter
    double buffers = 0;       // the attention masks
    double activations = 0;   // what one training step keeps for backward, at its peak
    double data = 0;          // the text: its bytes and its encoded int64 ids
    double gradient_copy = 0; // a parameter's first gradient, when backward must copy it (a bound)
    double total() const { return parameters + buffers + activations + data + gradient_copy; }
};

// The number of parameters make_model(config) would build, counted without
// building it (so even an impossible size gives an answer).
double count_parameters(const ModelConfig& config);

// The memory of training `config` with AdamW on batches of batch_size x
// block_size tokens from a text of text_bytes characters, measuring the
// gradients' norm every step (clip_grad_norm_, as train_gpt and train_tasks
// do, clipping or not; its 2-norm reads each gradient where it lies).
MemoryEstimate estimate_memory(const ModelConfig& config, int64_t batch_size, double text_bytes);

// The memory this process may still use, and where that number comes from.
struct MemoryLimit {
    double bytes = 0;
    std::string source; // "MemAvailable in /proc/meminfo", or the cgroup's limit
};

// MemAvailable from /proc/meminfo, or the memory cgroup's limit less its
// usage when that is lower (a container, a systemd slice). Files are read
// under `root` (tests point it at a fake tree). Nothing if neither is readable.
std::optional<MemoryLimit> available_memory(const std::string& root = "");

// Empty if `processes` times `need` (each process's: mpirun -np N on one
// machine) fits in `limit`; otherwise the message that refuses the run,
// with the numbers and the flags to lower (`shrink`).
std::string memory_problem(const MemoryEstimate& need, const std::optional<MemoryLimit>& limit,
                           const std::string& shrink, int processes = 1);

// How many processes of this mpirun share this machine: Open MPI's
// OMPI_COMM_WORLD_LOCAL_SIZE, else all of them (the world size).
int processes_on_this_machine();

} // namespace train
