// The rank side of tests/test_distributed.cpp: started by mpirun -np N (N
// even), every rank checks ember::distributed against values known
// without MPI, and prints "rank R: passed" or "rank R: FAILED: ..." and
// exits 1. Checked: rank and world size; broadcast_parameters gives every
// rank rank 0's weights; all_reduce_gradients averages exactly (integer
// gradients), the same bits in any bucket size, and the data-parallel
// gradient (each rank's share of a batch, averaged) is the gradient of the
// whole batch within 1e-5 relative; all_reduce_mean; barrier; errors.
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ember.h>

using namespace ember;

namespace {

void expect(bool ok, const std::string& what) {
    if (!ok) throw std::runtime_error(what);
}

// The same values, bit for bit (no tolerance).
bool equal(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && allclose(a, b, 0, 0); }

// A small MLP classifier, its weights drawn after manual_seed(seed): (B,8) -> (B,5).
std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
    manual_seed(seed);
    return std::make_shared<nn::Sequential>(
        std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::GELU>(),
                                                 std::make_shared<nn::Linear>(16, 5)});
}

std::vector<Tensor> gradients(const nn::Module& m) {
    std::vector<Tensor> g;
    for (const Tensor& p : m.parameters()) g.push_back(p.grad().clone());
    return g;
}

// || a - b || / || b || over all the tensors together.
double relative_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        Tensor d = (a[i] - b[i]).to(kFloat64), r = b[i].to(kFloat64);
        diff += sum(d * d).item();
        norm += sum(r * r).item();
    }
    return std::sqrt(diff / norm);
}

void check_all(int rank, int world) {
    expect(distributed::is_initialized(), "is_initialized after init_process_group");

    // broadcast_parameters: every rank built different weights; all end with rank 0's.
    auto model = make_mlp(100 + static_cast<uint64_t>(rank));
    distributed::broadcast_parameters(*model);
    auto rank0 = make_mlp(100);
    for (const auto& [name, t] : model->state_dict())
        expect(equal(t, rank0->state_dict().at(name)), "broadcast_parameters: " + name + " differs from rank 0's");

    // all_reduce_gradients on integers: rank r's gradients are (r + 1) * g,
    // so the mean is (N + 1) / 2 * g, exactly representable for even N.
    std::vector<Tensor> params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
        Tensor g = randint(200, params[i].shape()).to(kFloat32) - 100; // the same on every rank: the same seed
        params[i].set_grad(g * static_cast<double>(rank + 1));
    }
    std::vector<Tensor> before = gradients(*model);
    distributed::all_reduce_gradients(params);
    for (size_t i = 0; i < params.size(); ++i) {
        Tensor expected = before[i] / static_cast<double>(rank + 1) * ((world + 1) / 2.0);
        expect(equal(params[i].grad(), expected), "all_reduce_gradients: parameter " + std::to_string(i));
    }

    // Buckets change nothing: 7 floats per bucket gives the same bits as one bucket.
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(randn(params[i].shape()) * (rank + 1.5));
    std::vector<Tensor> saved = gradients(*model);
    distributed::all_reduce_gradients(params);
    std::vector<Tensor> whole = gradients(*model);
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(saved[i].clone());
    distributed::all_reduce_gradients(params, 7);
    for (size_t i = 0; i < params.size(); ++i)
        expect(equal(params[i].grad(), whole[i]), "buckets of 7 give other bits, parameter " + std::to_string(i));

    // Data parallelism: each rank's share of a batch of 4N rows, its
    // gradient averaged over the ranks, against the whole batch's gradient.
    manual_seed(7);
    const int64_t batch = 4 * world;
    Tensor x = randn({batch, 8});
    Tensor y = randint(5, {batch});
    model->zero_grad();
    cross_entropy(model->forward(x), y).backward();
    std::vector<Tensor> full = gradients(*model);
    model->zero_grad();
    cross_entropy(model->forward(x.slice(0, 4 * rank, 4 * rank + 4)), y.slice(0, 4 * rank, 4 * rank + 4)).backward();
    distributed::all_reduce_gradients(model->parameters());
    const double difference = relative_difference(gradients(*model), full);
    expect(difference <= 1e-5, "the averaged share gradients differ from the batch's by " + std::to_string(difference));

    // all_reduce_mean of the ranks' numbers 0 .. N-1.
    expect(distributed::all_reduce_mean(rank) == (world - 1) / 2.0, "all_reduce_mean of the ranks");
    distributed::barrier();

    // Errors name the function.
    Tensor no_grad = zeros({3}).requires_grad_();
    try {
        distributed::all_reduce_gradients({no_grad});
        expect(false, "all_reduce_gradients accepted a parameter without a gradient");
    } catch (const distributed::DistributedError& e) {
        expect(std::string(e.what()).find("[all_reduce_gradients]") != std::string::npos, e.what());
    }
}

} // namespace

int main() {
    distributed::ProcessGroupGuard group;
    const int rank = distributed::get_rank(), world = distributed::get_world_size();
    try {
        check_all(rank, world);
    } catch (const std::exception& e) {
        std::printf("rank %d of %d: FAILED: %s\n", rank, world, e.what());
        std::fflush(stdout);
        distributed::abort(1);
    }
    std::printf("rank %d of %d: passed\n", rank, world);
    return 0;
}
