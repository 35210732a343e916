// Tensor: a shared handle to a strided view of a Storage, plus autograd state.
//
// A tensor is (storage, shape, strides, offset, dtype): element (i, j, k) lives
// at storage[offset + i*strides[0] + j*strides[1] + k*strides[2]]. Views
// (transpose, slicing, expand, ...) make a new TensorImpl over the same
// Storage, so they cost no copy. Copying a Tensor copies the handle: both
// names refer to the same tensor, as in PyTorch. docs/tensor.md walks through
// it; the free functions behind the methods are declared in core/ops/ops.h.
// Tests: tests/test_tensor.cpp, tests/test_views.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor/dtype.h"
#include "core/tensor/error.h"
#include "core/tensor/scalar.h"
#include "core/tensor/storage.h"

namespace ember {

class Node;
class Generator;

// What a Tensor handle points at. Library code reads and writes these fields
// directly; users go through Tensor's methods.
struct TensorImpl {
    std::shared_ptr<Storage> storage;
    Shape shape;
    Shape strides;      // in elements, one per dimension
    int64_t offset = 0; // in elements, where element (0, 0, ...) lives
    DType dtype = DType::Float32;

    // Autograd state (docs/autograd.md).
    bool requires_grad = false;            // set on leaves by the user, on results by ops
    std::shared_ptr<Node> grad_fn;         // the node that computed this tensor; null for leaves
    uint32_t output_nr = 0;                // which of grad_fn's outputs it is (split's pieces: 0, 1, ...)
    std::shared_ptr<TensorImpl> grad;      // accumulated gradient of a leaf (or a retain_grad tensor)
    std::weak_ptr<Node> grad_accumulator;  // a leaf's AccumulateGrad node while a graph uses it
    std::shared_ptr<TensorImpl> view_base; // for a view, the tensor it views (in-place checks)
    uint64_t view_history_version = 0;     // for a view, its storage's history_version when taken
};

// One entry of Tensor::index: an integer selects (and drops the dimension),
// a Slice keeps it. Slice(1, 5, 2) is Python's 1:5:2; Slice() is ':'.
inline constexpr std::nullopt_t None = std::nullopt;
struct Slice {
    std::optional<int64_t> start;
    std::optional<int64_t> stop;
    int64_t step = 1;
    Slice(std::optional<int64_t> start_ = None, std::optional<int64_t> stop_ = None, int64_t step_ = 1)
        : start(start_), stop(stop_), step(step_) {}
};
using TensorIndex = std::variant<int64_t, Slice>;

// The dtype and requires_grad flag a factory makes its tensor with, in
// libtorch's spelling: zeros({2, 3}, TensorOptions().dtype(kFloat64).requires_grad(true)).
// A DType converts to it, so zeros({2, 3}, kFloat64) works too.
class TensorOptions {
public:
    TensorOptions() = default;
    TensorOptions(DType dtype) : dtype_(dtype) {} // NOLINT: implicit on purpose
    TensorOptions dtype(DType d) const {
        auto o = *this;
        o.dtype_ = d;
        return o;
    }
    TensorOptions requires_grad(bool on) const {
        auto o = *this;
        o.requires_grad_ = on;
        return o;
    }
    // Factories that infer a dtype from their values (full, arange) use the
    // inferred one when none was set; the others use float32.
    DType dtype_or(DType fallback) const { return dtype_.value_or(fallback); }
    bool requires_grad() const { return requires_grad_; }

private:
    std::optional<DType> dtype_;
    bool requires_grad_ = false;
};

// Returned by max(x, dim) and min(x, dim): `auto [values, indices] = max(x, 1);`
struct ValuesIndices;

class Tensor {
public:
    Tensor() = default; // an undefined tensor: defined() is false
    explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

    bool defined() const { return impl_ != nullptr; }
    TensorImpl* impl() const { return impl_.get(); }
    const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
    // True when both handles refer to the same tensor (not merely equal values).
    bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

    // ---- shape and layout --------------------------------------------------
    const Shape& shape() const { return checked().shape; }
    const Shape& sizes() const { return checked().shape; }
    int64_t size(int64_t dim) const;
    const Shape& strides() const { return checked().strides; }
    int64_t stride(int64_t dim) const;
    int64_t dim() const { return static_cast<int64_t>(checked().shape.size()); }
    int64_t numel() const;
    DType dtype() const { return checked().dtype; }
    bool is_floating_point() const { return is_floating(dtype()); }
    int64_t storage_offset() const { return checked().offset; }
    const std::shared_ptr<Storage>& storage() const { return checked().storage; }
    bool is_contiguous() const;

    // Pointer to element (0, 0, ...); T must be the tensor's C++ type.
    template <typename T>
    T* data_ptr() const {
        if (dtype_of<T>() != dtype())
            fail<DTypeError>("data_ptr", "tensor is ", dtype_name(dtype()), ", asked for ", dtype_name(dtype_of<T>()));
        return static_cast<T*>(checked().storage->data()) + checked().offset;
    }

    // The value of a one-element tensor, converted to T (or to double).
    template <typename T>
    T item() const;
    double item() const { return item<double>(); }

    // ---- autograd (core/autograd/autograd.cpp) ---------------------------------------
    bool requires_grad() const { return checked().requires_grad; }
    // Marks a leaf as a parameter to differentiate with respect to.
    Tensor& requires_grad_(bool on = true);
    // The accumulated gradient; undefined until a backward reaches this tensor.
    Tensor grad() const;
    void set_grad(const Tensor& grad) const;
    // Forgets the accumulated gradient. ember's own: PyTorch writes
    // `x.grad = None` (what its zero_grad(set_to_none=True) does for each
    // parameter); nn::Module::zero_grad and the optimisers call this.
    void zero_grad() const;
    const std::shared_ptr<Node>& grad_fn() const { return checked().grad_fn; }
    bool is_leaf() const { return checked().grad_fn == nullptr; }
    // Keep the gradient of this non-leaf in grad() during the next backward.
    void retain_grad() const;
    // Backpropagates from this tensor: from 1 if it is a scalar, otherwise from
    // `gradient` (same shape). Frees the graph's saved values unless retain_graph.
    void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
    // The same data, cut off from the graph.
    Tensor detach() const;

    // ---- views: no copy, shared storage (core/tensor/view.cpp) ---------------------
    Tensor view(const Shape& shape) const;
    Tensor reshape(const Shape& shape) const;
    Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
    Tensor transpose(int64_t dim0, int64_t dim1) const;
    Tensor t() const;
    Tensor permute(const Shape& dims) const;
    Tensor unsqueeze(int64_t dim) const;
    Tensor squeeze() const;
    Tensor squeeze(int64_t dim) const;
    Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
    Tensor slice(int64_t dim, std::optional<int64_t> start = None, std::optional<int64_t> stop = None,
                 int64_t step = 1) const;
    Tensor select(int64_t dim, int64_t index) const;
    Tensor index(std::initializer_list<TensorIndex> indices) const;
    Tensor operator[](int64_t index) const { return select(0, index); }
    Tensor expand(const Shape& shape) const;
    Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
    Tensor contiguous() const;
    std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
    std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
    std::vector<Tensor> split(const Shape& split_sizes, int64_t dim = 0) const;

    // ---- copies, conversion, in-place writes -----------------------------
    Tensor clone() const;
    Tensor to(DType dtype) const;
    Tensor& copy_(const Tensor& src);
    Tensor& fill_(Scalar value);
    Tensor& zero_() { return fill_(0); }
    // self op= other, other broadcast to self's shape (core/ops/inplace.cpp).
    Tensor& add_(const Tensor& other);
    Tensor& add_(Scalar other);
    Tensor& sub_(const Tensor& other);
    Tensor& sub_(Scalar other);
    Tensor& mul_(const Tensor& other);
    Tensor& mul_(Scalar other);
    Tensor& div_(const Tensor& other);
    Tensor& div_(Scalar other);
    Tensor& masked_fill_(const Tensor& mask, Scalar value);

    // ---- random fills, drawn from `generator` or the default one (core/random/)
    Tensor& uniform_(double from = 0.0, double to = 1.0, Generator* generator = nullptr);
    Tensor& normal_(double mean = 0.0, double std = 1.0, Generator* generator = nullptr);
    Tensor& bernoulli_(double p = 0.5, Generator* generator = nullptr);
    Tensor& exponential_(double lambd = 1.0, Generator* generator = nullptr);

    // ---- math, as in core/ops/ops.h -----------------------------------------
    Tensor matmul(const Tensor& other) const;
    Tensor pow(Scalar exponent) const;
    Tensor exp() const;
    Tensor log() const;
    Tensor sqrt() const;
    Tensor tanh() const;
    Tensor sigmoid() const;
    Tensor relu() const;
    Tensor abs() const;
    Tensor neg() const;
    Tensor sin() const;
    Tensor cos() const;
    Tensor sum() const;
    Tensor sum(int64_t dim, bool keepdim = false) const;
    Tensor sum(const Shape& dims, bool keepdim = false) const;
    Tensor mean() const;
    Tensor mean(int64_t dim, bool keepdim = false) const;
    Tensor mean(const Shape& dims, bool keepdim = false) const;
    Tensor var() const;
    Tensor var(int64_t dim, bool unbiased = true, bool keepdim = false) const;
    Tensor max() const;
    ValuesIndices max(int64_t dim, bool keepdim = false) const;
    Tensor min() const;
    ValuesIndices min(int64_t dim, bool keepdim = false) const;
    ValuesIndices topk(int64_t k, int64_t dim = -1, bool largest = true) const;
    Tensor argmax() const;
    Tensor argmax(int64_t dim, bool keepdim = false) const;
    Tensor softmax(int64_t dim) const;
    Tensor log_softmax(int64_t dim) const;
    Tensor masked_fill(const Tensor& mask, Scalar value) const;
    Tensor tril(int64_t diagonal = 0) const;
    Tensor triu(int64_t diagonal = 0) const;
    Tensor index_select(int64_t dim, const Tensor& index) const;
    Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;

private:
    const TensorImpl& checked() const {
        if (!impl_) throw Error("[tensor] this tensor is undefined (default-constructed)");
        return *impl_;
    }
    std::shared_ptr<TensorImpl> impl_;
};

struct ValuesIndices {
    Tensor values;
    Tensor indices;
};

// Prints as PyTorch does: tensor([[-2.0260, -2.0655], ...]) (core/tensor/print.cpp).
std::ostream& operator<<(std::ostream& out, const Tensor& tensor);
std::string to_string(const Tensor& tensor);

} // namespace ember
