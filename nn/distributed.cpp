// ember::distributed: see distributed.h. The part that moves bytes between
// processes is MPI's; what is ember's is the flat gradient buffer, its
// buckets, and the fixed order of the sum. With EMBER_MPI undefined (a
// build without MPI) the transport below is a world of one process: the
// mean over one rank is the value itself, and nothing is sent.
// docs/distributed.md; tests: tests/test_distributed.cpp.
#include "nn/distributed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/autograd/autograd.h"
#include "core/tensor/internal.h"

#ifdef EMBER_MPI
// Only MPI's C interface: Open MPI's deprecated C++ bindings, which mpi.h
// would otherwise pull in, draw warnings from GCC (-Wcast-function-type).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace ember::distributed {

namespace {

bool initialized = false;

void require_initialized(const char* op) {
    if (!initialized) fail<DistributedError>(op, "call init_process_group() first");
}

// How many processes mpirun started, from the environment variables by
// which it tells each one (Open MPI's, or MPICH's Hydra's); 0 when no
// launcher started this process.
int launched_processes() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
        if (const char* value = std::getenv(name)) return std::atoi(value);
    return 0;
}

// ---- the transport: MPI, or a world of one ------------------------------------------------

#ifdef EMBER_MPI

// MPI returns an error code (MPI_ERRORS_RETURN is set below); this turns it into a DistributedError.
void check(int code, const char* op, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail<DistributedError>(op, call, " failed: ", std::string(text, static_cast<size_t>(length)));
}

// False in a process that mpirun did not start: a world of one that never
// calls MPI. (Open MPI can start such a "singleton", but slowly, and it
// keeps memory until exit that LeakSanitizer reports in CI's sanitizer build.)
bool mpi_active = false;

void transport_init() {
    if (launched_processes() == 0) return;
    mpi_active = true;
    int provided = 0;
    // FUNNELED: the process has threads (OpenMP's), but only this one calls MPI.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init_process_group", "MPI_Init_thread");
    // Errors come back as codes (check above) instead of ending every process.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void transport_finalize() {
    if (mpi_active) MPI_Finalize();
    mpi_active = false;
}

int transport_rank() {
    int rank = 0;
    if (mpi_active) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

int transport_size() {
    int size = 1;
    if (mpi_active) MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

void transport_barrier() {
    if (mpi_active) check(MPI_Barrier(MPI_COMM_WORLD), "barrier", "MPI_Barrier");
}

void transport_broadcast(void* data, int64_t bytes, int src) {
    // MPI counts in int: send a large tensor in pieces of at most 1 GiB.
    auto* p = static_cast<char*>(data);
    for (int64_t done = 0; done < bytes;) {
        const int piece = static_cast<int>(std::min<int64_t>(bytes - done, int64_t{1} << 30));
        check(MPI_Bcast(p + done, piece, MPI_BYTE, src, MPI_COMM_WORLD), "broadcast_parameters", "MPI_Bcast");
        done += piece;
    }
}

// Every rank's `count` floats in rank order: out[r * count + i] is element i of rank r's `in`.
// With a different chunk for every destination: MPI_Alltoall (all_to_all);
// with the same chunk for all: MPI_Allgather (all_gather).
void transport_all_to_all(const float* in, int64_t count, float* out, const char* op) {
    check(MPI_Alltoall(in, static_cast<int>(count), MPI_FLOAT, out, static_cast<int>(count), MPI_FLOAT, MPI_COMM_WORLD),
          op, "MPI_Alltoall");
}

void transport_all_gather(const void* in, int64_t bytes, void* out, const char* op) {
    check(MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD),
          op, "MPI_Allgather");
}

#else

void transport_init() {
    const int launched = launched_processes();
    if (launched > 1)
        fail<DistributedError>("init_process_group", "this process is one of ", launched,
                               " started by mpirun, but ember was built without MPI; install Open MPI "
                               "(libopenmpi-dev openmpi-bin) and rebuild (meson setup --reconfigure -Dmpi=enabled)");
}
void transport_finalize() {}
int transport_rank() { return 0; }
int transport_size() { return 1; }
void transport_barrier() {}
void transport_broadcast(void*, int64_t, int) {}
void transport_all_to_all(const float* in, int64_t count, float* out, const char*) {
    std::memcpy(out, in, static_cast<size_t>(count) * sizeof(float));
}
void transport_all_gather(const void* in, int64_t bytes, void* out, const char*) {
    std::memcpy(out, in, static_cast<size_t>(bytes));
}

#endif

// ---- Note [a deterministic all-reduce] ------------------------------------------------------
// MPI_Allreduce would sum the ranks' buffers in whatever order its algorithm
// takes (ring, recursive doubling, a tree), chosen by message size and rank
// count, and MPI only recommends that the order be the same every time. So
// the reduction is built from two exchanges that only move data, and ember
// does the adding, always in rank order:
//   1. all_to_all (a reduce-scatter's traffic): the buffer is cut into N
//      chunks; rank r receives chunk r of every rank, in rank order;
//   2. rank r sums its N copies of chunk r, rank 0's first, and divides by N;
//   3. all_gather: every rank receives every rank's averaged chunk.
// Each rank sends and receives (N-1)/N of the buffer in each exchange,
// 2 (N-1)/N of it in all: exactly what a ring all-reduce moves, so nothing
// is lost for the fixed order. Every rank ends with the same bits, in every
// run, for any N (docs/distributed.md).

// Replaces buffer[0..n) (n floats, the same n on every rank) by its mean over the ranks.
void all_reduce_mean_bucket(float* buffer, int64_t n, int world, const char* op) {
    const int64_t chunk = (n + world - 1) / world; // the last chunk is padded with zeros
    std::vector<float> padded(static_cast<size_t>(chunk * world), 0.0f);
    std::copy(buffer, buffer + n, padded.begin());
    std::vector<float> copies(padded.size()); // (N, chunk): chunk r of every rank
    transport_all_to_all(padded.data(), chunk, copies.data(), op);
    std::vector<float> mine(static_cast<size_t>(chunk));
    const float ranks = static_cast<float>(world);
    for (int64_t i = 0; i < chunk; ++i) {
        float total = copies[static_cast<size_t>(i)];
        for (int r = 1; r < world; ++r) total += copies[static_cast<size_t>(r * chunk + i)];
        mine[static_cast<size_t>(i)] = total / ranks;
    }
    transport_all_gather(mine.data(), chunk * static_cast<int64_t>(sizeof(float)), padded.data(), op);
    std::copy(padded.begin(), padded.begin() + n, buffer);
}

} // namespace

// ---- the process group ---------------------------------------------------------------------

bool is_available() {
#ifdef EMBER_MPI
    return true;
#else
    return false;
#endif
}

void init_process_group() {
    if (initialized) fail<DistributedError>("init_process_group", "the process group is already initialized");
    transport_init();
    initialized = true;
}

void destroy_process_group() {
    if (!initialized) return;
    transport_finalize();
    initialized = false;
}

bool is_initialized() { return initialized; }

void abort(int status) {
#ifdef EMBER_MPI
    if (mpi_active) MPI_Abort(MPI_COMM_WORLD, status);
#endif
    std::exit(status);
}

int get_rank() {
    require_initialized("get_rank");
    return transport_rank();
}

int get_world_size() {
    require_initialized("get_world_size");
    return transport_size();
}

void barrier() {
    require_initialized("barrier");
    transport_barrier();
}

// ---- broadcast and all-reduce ----------------------------------------------------------------

void broadcast_parameters(nn::Module& module, int src) {
    require_initialized("broadcast_parameters");
    const int world = transport_size();
    if (src < 0 || src >= world)
        fail<DistributedError>("broadcast_parameters", "src must be a rank in [0, ", world, "), got ", src);
    if (world == 1) return;
    // The same keys and sizes on every rank, or the bytes would land in the wrong tensors.
    nn::StateDict state = module.state_dict();
    int64_t total_bytes = 0;
    for (const auto& [name, t] : state) total_bytes += t.numel() * static_cast<int64_t>(element_size(t.dtype()));
    std::vector<int64_t> every(static_cast<size_t>(world));
    transport_all_gather(&total_bytes, sizeof total_bytes, every.data(), "broadcast_parameters");
    for (int r = 0; r < world; ++r)
        if (every[static_cast<size_t>(r)] != total_bytes)
            fail<DistributedError>("broadcast_parameters", "rank ", r, "'s module holds ",
                                   every[static_cast<size_t>(r)], " bytes of state and this rank's ", total_bytes,
                                   ": the modules differ");
    NoGradGuard no_grad;
    for (const auto& [name, t] : state) {
        // Parameters are contiguous (optimisers require it); anything else goes through a copy.
        Tensor data = internal::contiguous_data(t.detach());
        const auto size = static_cast<int64_t>(element_size(data.dtype()));
        transport_broadcast(static_cast<char*>(data.storage()->data()) + data.storage_offset() * size,
                            data.numel() * size, src);
        if (data.storage() != t.storage()) t.detach().copy_(data);
        internal::bump_version(t);
    }
}

void all_reduce_gradients(const std::vector<Tensor>& params, int64_t bucket_elements) {
    require_initialized("all_reduce_gradients");
    if (bucket_elements < 1)
        fail<DistributedError>("all_reduce_gradients", "bucket_elements must be positive, got ", bucket_elements);
    int64_t n = 0;
    for (size_t i = 0; i < params.size(); ++i) {
        const Tensor& g = params[i].grad();
        if (!g.defined())
            fail<DistributedError>("all_reduce_gradients", "parameter ", i, " of shape ", params[i].shape(),
                                   " has no gradient: run backward first, on every rank");
        if (g.dtype() != kFloat32)
            fail<DistributedError>("all_reduce_gradients", "parameter ", i, "'s gradient is ", dtype_name(g.dtype()),
                                   " (shape ", g.shape(), "); only float32 gradients are reduced");
        n += g.numel();
    }
    const int world = transport_size();
    if (world == 1) return; // the mean over one rank is the gradient itself
    // The same element count on every rank, or chunks would pair wrong elements.
    std::vector<int64_t> counts(static_cast<size_t>(world));
    transport_all_gather(&n, sizeof n, counts.data(), "all_reduce_gradients");
    for (int r = 0; r < world; ++r)
        if (counts[static_cast<size_t>(r)] != n)
            fail<DistributedError>("all_reduce_gradients", "rank ", r, " has ", counts[static_cast<size_t>(r)],
                                   " gradient elements and this rank ", n, ": pass the same parameters on every rank");

    // Copy in: every gradient, one after another, into one flat buffer.
    std::vector<float> flat(static_cast<size_t>(n));
    int64_t offset = 0;
    for (const Tensor& p : params) {
        Tensor g = internal::contiguous_data(p.grad());
        std::memcpy(flat.data() + offset, g.data_ptr<float>(), static_cast<size_t>(g.numel()) * sizeof(float));
        offset += g.numel();
    }
    // Reduce it a bucket at a time (each bucket's scratch is 3 bucket sizes).
    for (int64_t start = 0; start < n; start += bucket_elements)
        all_reduce_mean_bucket(flat.data() + start, std::min(bucket_elements, n - start), world,
                               "all_reduce_gradients");
    // Copy out, in place: each gradient tensor keeps its storage.
    NoGradGuard no_grad;
    offset = 0;
    for (const Tensor& p : params) {
        Tensor g = p.grad();
        if (g.is_contiguous()) {
            std::memcpy(g.data_ptr<float>(), flat.data() + offset, static_cast<size_t>(g.numel()) * sizeof(float));
            internal::bump_version(g);
        } else {
            std::vector<float> part(flat.begin() + offset, flat.begin() + offset + g.numel());
            g.copy_(from_vector(part, g.shape()));
        }
        offset += g.numel();
    }
}

double all_reduce_mean(double value) {
    require_initialized("all_reduce_mean");
    const int world = transport_size();
    if (world == 1) return value;
    std::vector<double> every(static_cast<size_t>(world));
    transport_all_gather(&value, sizeof value, every.data(), "all_reduce_mean");
    double total = every[0];
    for (int r = 1; r < world; ++r) total += every[static_cast<size_t>(r)]; // rank order: the same on every rank
    return total / world;
}

} // namespace ember::distributed
