// train_gpt --diagnostics: what the makemore lectures (part 3, "activations
// and gradients") watch while a network trains, for train_gpt's models.
//
//   * the activations of each layer's nonlinearity (the MLP's ReLU or GELU):
//     their histogram, mean, standard deviation and the share at or below 0
//     (a ReLU's dead side);
//   * the gradients of the loss with respect to those same activations;
//   * the gradient of every 2-d weight, with its grad:data ratio (the std of
//     the gradient over the std of the weight);
//   * the update:data ratio of every 2-d weight at every step: the std of
//     what the optimiser changed over the std of the weight before, as log10.
//     The lectures' rule of thumb: around -3; far below, the layer learns
//     slowly, far above, too fast. (The lecture computes lr * grad for SGD;
//     with AdamW the step is not lr * grad, so this is the change itself.)
//
// The histograms are taken at the run's last step (at its first with
// --max-iters 1: the initialisation), the ratios at every step. At the end
// the run writes OUT/diagnostics_*.svg and OUT/diagnostics.csv. Under
// mpirun the numbers are rank 0's (its share of the batch; after the
// exchange, the gradients are everyone's). docs/training.md explains the
// pictures. Tests: tests/test_train_gpt.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ember.h>

namespace train {

// The summary of one tensor's values: count, mean, standard deviation (with
// Bessel's correction, as torch.std), the share at or below zero, and a
// histogram of `bins` equal bins from the smallest value to the largest,
// scaled as a density (torch.histogram(density=True)): the bins' areas add
// up to 1. Computed in double, in the tensor's row-major order.
struct Stats {
    int64_t count = 0;
    double mean = 0, std = 0, nonpositive = 0;
    double lo = 0, hi = 0;       // the histogram's range
    std::vector<double> density; // bins
};
Stats describe(const ember::Tensor& t, int bins = 60);

// The std of (after - before) over the std of before: the update:data ratio.
double update_to_data(const ember::Tensor& before, const ember::Tensor& after);

class Diagnostics {
public:
    // Hooks every ReLU and GELU module of `model` (in named_modules order),
    // and takes every 2-d parameter for the weights' numbers.
    explicit Diagnostics(ember::nn::Module& model);
    Diagnostics(const Diagnostics&) = delete;
    Diagnostics& operator=(const Diagnostics&) = delete;
    ~Diagnostics();

    // The next forward keeps its activations (retain_grad): call before the
    // forward of the step whose histograms are wanted.
    void capture_next_forward() { capture_ = true; }
    // After that step's backward: the activations', their gradients' and the
    // weights' gradients' numbers (the histograms the pictures show).
    void after_backward(int64_t step);
    // Around optimizer.step(): the update:data ratio of each 2-d weight.
    void before_update();
    void after_update(int64_t step);

    // OUT/diagnostics_activations.svg, _gradients.svg, _weights.svg,
    // _updates.svg and diagnostics.csv; returns their paths, comma-separated.
    // Throws std::runtime_error naming a file that cannot be written.
    std::string write(const std::string& out_dir, const std::string& title) const;

    struct Named {
        std::string name;
        ember::Shape shape;
        Stats stats;
        double grad_to_data = 0; // weights only
    };
    const std::vector<Named>& activations() const { return activation_stats_; }
    const std::vector<Named>& activation_grads() const { return grad_stats_; }
    const std::vector<Named>& weight_grads() const { return weight_stats_; }
    // ratios()[k][j]: log10 of weight j's update:data ratio at steps()[k].
    const std::vector<int64_t>& steps() const { return update_steps_; }
    const std::vector<std::vector<double>>& ratios() const { return update_ratios_; }
    const std::vector<std::string>& weight_names() const { return weight_names_; }

private:
    std::vector<std::pair<std::string, ember::nn::Module*>> acts_;
    std::vector<ember::nn::RemovableHandle> handles_;
    std::vector<ember::Tensor> captured_;
    bool capture_ = false;
    std::vector<std::string> weight_names_;
    std::vector<ember::Tensor> weights_, before_;
    int64_t histogram_step_ = -1;
    std::vector<Named> activation_stats_, grad_stats_, weight_stats_;
    std::vector<int64_t> update_steps_;
    std::vector<std::vector<double>> update_ratios_;
};

} // namespace train
