// Data-parallel training over MPI, with PyTorch's torch.distributed names:
// N processes (ranks) each hold the whole model, each computes the gradient
// of its share of the batch, and all_reduce_gradients averages the
// gradients so that every rank takes the same optimiser step. Built on an
// existing MPI (Open MPI), never a home-made transport. In a build without
// MPI (-Dmpi=disabled, or MPI not installed) the same functions describe a
// world of one process, so a program written for N ranks runs unchanged on
// one. docs/distributed.md; tests: tests/test_distributed.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor/error.h"
#include "nn/module.h"

namespace ember::distributed {

// An MPI call that failed, a function used before init_process_group, or
// a program started by mpirun on a build without MPI. The message names
// the function: [all_reduce_gradients] ...
class DistributedError : public Error {
public:
    using Error::Error;
};

// True when ember was built with MPI (meson's `mpi` option found it).
bool is_available();

// Joins the processes mpirun started (MPI_Init_thread; only the calling
// thread ever calls MPI, OpenMP's threads never do). A process mpirun did
// not start is a world of one and never calls MPI. Without MPI: a world of
// one, unless mpirun started this process as one of several, which throws a
// DistributedError saying to rebuild with MPI. Calling it twice throws.
void init_process_group();
// MPI_Finalize. Every rank must call it; nothing may be called after it.
void destroy_process_group();
bool is_initialized();

// Ends every rank's process with exit status `status` (MPI_Abort; without
// MPI, std::exit): for an error on one rank that the others cannot know of,
// and would otherwise wait for at their next exchange, forever.
[[noreturn]] void abort(int status);

// The RAII form: init_process_group() on construction, and
// destroy_process_group() when the scope ends.
class ProcessGroupGuard {
public:
    ProcessGroupGuard() { init_process_group(); }
    ~ProcessGroupGuard() { destroy_process_group(); }
    ProcessGroupGuard(const ProcessGroupGuard&) = delete;
    ProcessGroupGuard& operator=(const ProcessGroupGuard&) = delete;
};

// This process's number, 0 .. get_world_size() - 1, and the number of processes.
int get_rank();
int get_world_size();

// Waits until every rank has called it.
void barrier();

// Copies rank `src`'s parameters and buffers (state_dict order) into every
// other rank's module, so that all start from the same weights. The
// modules must have the same state_dict keys, shapes and dtypes on every rank.
void broadcast_parameters(nn::Module& module, int src = 0);

// The gradients of `params` (float32, each defined) replaced in place, on
// every rank, by their mean over the ranks. They travel as one flat float32
// buffer, cut into buckets of at most `bucket_elements` floats: one exchange
// per bucket. The sum runs in rank order (rank 0 + rank 1 + ...), the same
// on every rank and in every run, whatever the number of machines: the same
// run gives the same bits (nn/distributed.cpp, Note [a deterministic all-reduce]).
// Every rank must pass the same parameters in the same order.
inline constexpr int64_t kDefaultBucketElements = int64_t{1} << 22; // 16 MiB of float32
void all_reduce_gradients(const std::vector<Tensor>& params, int64_t bucket_elements = kDefaultBucketElements);

// The mean over the ranks of one number per rank (a loss, a flag), summed
// in rank order: the same double on every rank.
double all_reduce_mean(double value);

} // namespace ember::distributed
