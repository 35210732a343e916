// gradcheck: see gradcheck.h. Tests: tests/test_gradcheck.cpp.
#include "core/autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "core/autograd/autograd.h"
#include "core/ops/ops.h"

namespace ember {

namespace {

// "(1,2)": the multi-index of flat element `flat` in `shape`.
std::string index_str(int64_t flat, const Shape& shape) {
    Shape index(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        index[d] = flat % shape[d];
        flat /= shape[d];
    }
    return shape_str(index);
}

// The output of fn as a flat float64 vector (no graph).
std::vector<double> evaluate(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
    NoGradGuard no_grad;
    Tensor out = fn(inputs).to(kFloat64).contiguous();
    const double* p = out.data_ptr<double>();
    return std::vector<double>(p, p + out.numel());
}

// A tensor whose gradient is checked, and how errors name it.
struct Checked {
    Tensor tensor;
    std::string label; // "input 1", "parameter 0"
};

void require_float64(const Tensor& t, const std::string& label) {
    if (t.dtype() != kFloat64)
        fail<ValueError>("gradcheck", label, " of shape ", t.shape(), " is ", dtype_name(t.dtype()),
                         "; what gradcheck differentiates must be float64 (use to(kFloat64))");
}

} // namespace

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const std::vector<Tensor>& parameters,
               GradcheckOptions options) {
    // Inputs are copied (the caller's tensors and their .grad stay
    // untouched); parameters are used as they are, since fn reaches them
    // directly, and put back afterwards.
    std::vector<Tensor> work;
    std::vector<Checked> checked;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = inputs[i];
        if (!t.defined()) {
            work.push_back(t);
            continue;
        }
        Tensor copy = t.detach().clone();
        if (t.requires_grad()) {
            require_float64(t, "input " + std::to_string(i));
            copy.requires_grad_(true);
            checked.push_back({copy, "input " + std::to_string(i)});
        }
        work.push_back(copy);
    }
    std::vector<Tensor> saved_grads;
    for (size_t i = 0; i < parameters.size(); ++i) {
        const Tensor& p = parameters[i];
        std::string label = "parameter " + std::to_string(i);
        if (!p.defined() || !p.is_leaf() || !p.requires_grad() || !p.is_contiguous())
            fail<ValueError>("gradcheck", label, " must be a contiguous leaf tensor that requires grad");
        require_float64(p, label);
        checked.push_back({p, label});
        saved_grads.push_back(p.grad());
    }
    if (checked.empty()) fail<ValueError>("gradcheck", "no input requires grad: nothing to check");

    Tensor out = fn(work);
    if (!out.is_floating_point())
        fail<ValueError>("gradcheck", "the function's output must be floating point, got ", dtype_name(out.dtype()));
    if (!out.requires_grad())
        fail<ValueError>("gradcheck", "the output of shape ", out.shape(),
                         " does not depend on any input that requires grad");
    const int64_t n_out = out.numel();

    // Analytic Jacobian, one row per output element: backward from a one-hot
    // gradient gives d out[k] / d x for every checked x at once.
    // analytic[c][k * n_c + j] = d out[k] / d x_c[j].
    std::vector<std::vector<double>> analytic(checked.size());
    for (size_t c = 0; c < checked.size(); ++c) analytic[c].assign(n_out * checked[c].tensor.numel(), 0.0);
    for (int64_t k = 0; k < n_out; ++k) {
        for (const Checked& c : checked) c.tensor.zero_grad();
        Tensor onehot = zeros(out.shape(), out.dtype());
        onehot.view({-1}).select(0, k).fill_(1);
        out.backward(onehot, /*retain_graph=*/true);
        for (size_t c = 0; c < checked.size(); ++c) {
            Tensor g = checked[c].tensor.grad();
            if (!g.defined()) continue; // output k does not depend on this one
            Tensor gd = g.to(kFloat64).contiguous();
            const double* p = gd.data_ptr<double>();
            int64_t n_in = gd.numel();
            for (int64_t j = 0; j < n_in; ++j) analytic[c][k * n_in + j] = p[j];
        }
    }
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].set_grad(saved_grads[i]);

    // Numerical Jacobian, one column per element: nudge it both ways.
    for (size_t c = 0; c < checked.size(); ++c) {
        const Tensor& x = checked[c].tensor;
        double* data = x.data_ptr<double>();
        const int64_t n_in = x.numel();
        for (int64_t j = 0; j < n_in; ++j) {
            double original = data[j];
            data[j] = original + options.eps;
            std::vector<double> plus = evaluate(fn, work);
            data[j] = original - options.eps;
            std::vector<double> minus = evaluate(fn, work);
            data[j] = original;
            for (int64_t k = 0; k < n_out; ++k) {
                double numerical = (plus[k] - minus[k]) / (2 * options.eps);
                double a = analytic[c][k * n_in + j];
                if (std::abs(a - numerical) <= options.atol + options.rtol * std::abs(numerical)) continue;
                if (!options.raise_exception) return false;
                std::ostringstream msg;
                msg << "[gradcheck] gradient mismatch for " << checked[c].label << " of shape " << shape_str(x.shape())
                    << " at element " << index_str(j, x.shape()) << ", output element " << index_str(k, out.shape())
                    << " of shape " << shape_str(out.shape()) << ": analytic " << a << ", numerical " << numerical
                    << " (atol " << options.atol << ", rtol " << options.rtol << ")";
                throw GradcheckError(msg.str());
            }
        }
    }
    return true;
}

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions options) {
    return gradcheck(fn, inputs, {}, options);
}

} // namespace ember
