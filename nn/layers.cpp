// Embedding, LayerNorm, Dropout, ReLU, GELU: see layers.h.
// Tests: tests/test_layers.cpp.
#include "nn/layers.h"

#include <sstream>

#include "nn/init.h"

namespace ember::nn {

// Python's repr of a small float as the reprs print it (1e-05, 0.2, 1.0):
// the shortest %g text that reads back as the same double.
static std::string python_float(double v) {
    std::string s;
    for (int digits = 1; digits <= 17; ++digits) {
        std::ostringstream trial;
        trial.precision(digits);
        trial << v;
        s = trial.str();
        if (std::stod(s) == v) break;
    }
    if (s.find_first_of(".en") == std::string::npos) s += ".0"; // 1 -> 1.0
    return s;
}

Embedding::Embedding(int64_t num, int64_t dim) : Module("Embedding"), num_embeddings(num), embedding_dim(dim) {
    if (num < 0 || dim < 0) fail<ValueError>("Embedding", "sizes must be non-negative, got ", num, " and ", dim);
    weight = register_parameter("weight", empty({num, dim}));
    init::normal_(weight); // nn.Embedding.reset_parameters: N(0, 1)
}

Tensor Embedding::forward(const Tensor& idx) { return embedding(idx, weight); }

std::string Embedding::extra_repr() const {
    return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
}

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine, bool with_bias)
    : Module("LayerNorm"), normalized_shape(shape), eps(eps_) {
    if (shape.empty()) fail<ValueError>("LayerNorm", "normalized_shape must not be empty");
    for (int64_t s : shape)
        if (s < 0) fail<ValueError>("LayerNorm", "normalized_shape ", shape, " has a negative size");
    if (!(eps >= 0)) fail<ValueError>("LayerNorm", "eps must be non-negative, got ", eps);
    if (affine) {
        weight = register_parameter("weight", ones(shape));
        if (with_bias) bias = register_parameter("bias", zeros(shape));
    }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

std::string LayerNorm::extra_repr() const {
    // "(32,), eps=1e-05, elementwise_affine=True", as Python prints a tuple.
    std::string shape = "(";
    for (size_t i = 0; i < normalized_shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(normalized_shape[i]);
    shape += normalized_shape.size() == 1 ? ",)" : ")";
    return shape + ", eps=" + python_float(eps) + ", elementwise_affine=" + (weight.defined() ? "True" : "False");
}

Dropout::Dropout(double p_, std::shared_ptr<Generator> generator_)
    : Module("Dropout"), p(p_), generator(std::move(generator_)) {
    if (!(p >= 0.0 && p <= 1.0)) fail<ValueError>("Dropout", "probability must be between 0 and 1, got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training(), generator.get()); }

int set_dropout_generator(Module& model, std::shared_ptr<Generator> generator) {
    int count = 0;
    model.apply([&](Module& m) {
        if (auto* d = dynamic_cast<Dropout*>(&m)) {
            d->generator = generator;
            ++count;
        }
    });
    return count;
}

std::string Dropout::extra_repr() const { return "p=" + python_float(p) + ", inplace=False"; }

GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
    if (approximate != "none" && approximate != "tanh")
        fail<ValueError>("GELU", "approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
}

} // namespace ember::nn
