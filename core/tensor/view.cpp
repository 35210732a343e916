// Views: new shapes and strides over the same storage, with no copy.
//
// Each view op computes the geometry (shape, strides, offset) of its result
// and records a backward that maps the output gradient back to the input's
// geometry. Only reshape (when strides forbid a view) and contiguous (on a
// non-contiguous tensor) copy. docs/tensor.md draws each of these.
// Tests: tests/test_views.cpp.
#include <algorithm>
#include <numeric>
#include <optional>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::make_view;

// ---- view, reshape, flatten -----------------------------------------------------------

// Replaces a single -1 in `shape` by whatever makes the element count `numel`.
static Shape infer_size(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
    Shape out = shape;
    std::optional<size_t> infer;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1) {
            if (infer) fail<ValueError>(op, "only one dimension can be -1, got ", shape);
            infer = i;
        } else if (shape[i] < 0) {
            fail<ValueError>(op, "invalid size ", shape[i], " in shape ", shape);
        }
    }
    // The product of the known sizes, checked first so that it cannot overflow
    // (a tensor with no elements can be viewed with any zero-sized shape).
    Shape known_sizes = shape;
    if (infer) known_sizes[*infer] = 1;
    check_sizes(known_sizes, op);
    const int64_t known = shape_numel(known_sizes);
    if (infer) {
        if (known == 0 || numel % known != 0)
            fail<ShapeError>(op, "shape ", shape, " is invalid for a tensor of shape ", from, " (", numel,
                             " elements)");
        out[*infer] = numel / known;
    } else if (known != numel) {
        fail<ShapeError>(op, "shape ", shape, " is invalid for a tensor of shape ", from, " (", numel, " elements)");
    }
    return out;
}

// The strides that let `new_shape` view memory laid out as (old_shape,
// old_strides), or nothing if no strides can. The old dims are cut into
// chunks that are contiguous in memory; each chunk must be covered exactly by
// consecutive new dims. (PyTorch's computeStride, same algorithm.)
static std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape) {
    if (shape_numel(old_shape) == 0) return contiguous_strides(new_shape);
    if (old_shape.empty()) return Shape(new_shape.size(), 1);
    Shape new_strides(new_shape.size());
    int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
    int64_t chunk_base_stride = old_strides.back();
    int64_t tensor_numel = 1;
    int64_t view_numel = 1;
    for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
        tensor_numel *= old_shape[d];
        // A chunk ends at d when the dim before it does not continue it.
        bool chunk_ends = d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride);
        if (!chunk_ends) continue;
        while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
            new_strides[view_d] = view_numel * chunk_base_stride;
            view_numel *= new_shape[view_d];
            --view_d;
        }
        if (view_numel != tensor_numel) return std::nullopt;
        if (d > 0) {
            chunk_base_stride = old_strides[d - 1];
            tensor_numel = 1;
            view_numel = 1;
        }
    }
    if (view_d != -1) return std::nullopt;
    return new_strides;
}

Tensor Tensor::view(const Shape& shape) const {
    Shape target = infer_size(shape, numel(), "view", this->shape());
    std::optional<Shape> new_strides = view_strides(this->shape(), strides(), target);
    if (!new_strides)
        fail<ShapeError>("view", "a tensor of shape ", this->shape(), " with strides ", strides(),
                         " cannot be viewed as ", target,
                         " without a copy (its memory is not laid out that way); use reshape(), which copies");
    Tensor out = make_view(*this, target, *new_strides, storage_offset());
    // forward: out = x seen as `target`, so dx = dout seen as x's shape.
    if (needs_grad(*this))
        attach(out, "ViewBackward0", {*this},
               [in = this->shape()](const Tensor& dout) -> Grads { return {dout.reshape(in)}; });
    return out;
}

Tensor Tensor::reshape(const Shape& shape) const {
    Shape target = infer_size(shape, numel(), "reshape", this->shape());
    if (view_strides(this->shape(), strides(), target)) return view(target);
    return contiguous().view(target);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
    if (dim() == 0) return reshape({1});
    int64_t start = wrap_dim(start_dim, dim(), "flatten");
    int64_t end = wrap_dim(end_dim, dim(), "flatten");
    if (start > end)
        fail<ValueError>("flatten", "start_dim ", start_dim, " comes after end_dim ", end_dim, " for shape ", shape());
    Shape target(shape().begin(), shape().begin() + start);
    int64_t merged = 1;
    for (int64_t d = start; d <= end; ++d) merged *= shape()[d];
    target.push_back(merged);
    target.insert(target.end(), shape().begin() + end + 1, shape().end());
    return reshape(target);
}

// ---- transpose, permute, squeeze, unsqueeze -------------------------------------------

// Swaps two dims; `grad_name` is TransposeBackward0, or TBackward0 for t().
static Tensor transpose_dims(const Tensor& x, int64_t dim0, int64_t dim1, const char* grad_name) {
    int64_t d0 = wrap_dim(dim0, x.dim(), "transpose");
    int64_t d1 = wrap_dim(dim1, x.dim(), "transpose");
    Shape new_shape = x.shape();
    Shape new_strides = x.strides();
    if (x.dim() > 0) {
        std::swap(new_shape[d0], new_shape[d1]);
        std::swap(new_strides[d0], new_strides[d1]);
    }
    Tensor out = make_view(x, new_shape, new_strides, x.storage_offset());
    // forward: out = x with dims d0 and d1 swapped, so dx = dout swapped back.
    if (needs_grad(x))
        attach(out, grad_name, {x}, [d0, d1](const Tensor& dout) -> Grads { return {dout.transpose(d0, d1)}; });
    return out;
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
    return transpose_dims(*this, dim0, dim1, "TransposeBackward0");
}

Tensor Tensor::t() const {
    if (dim() > 2) fail<ShapeError>("t", "expects a tensor with at most 2 dimensions, got shape ", shape());
    return transpose_dims(*this, 0, dim() < 2 ? 0 : 1, "TBackward0");
}

Tensor Tensor::permute(const Shape& dims) const {
    if (static_cast<int64_t>(dims.size()) != dim())
        fail<ShapeError>("permute", "got ", dims.size(), " dims ", dims, " for a tensor of shape ", shape());
    Shape order(dims.size());
    std::vector<bool> used(dims.size(), false);
    for (size_t i = 0; i < dims.size(); ++i) {
        order[i] = wrap_dim(dims[i], dim(), "permute");
        if (used[order[i]]) fail<ValueError>("permute", "dims ", dims, " repeat dimension ", order[i]);
        used[order[i]] = true;
    }
    Shape new_shape(dims.size()), new_strides(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) {
        new_shape[i] = shape()[order[i]];
        new_strides[i] = strides()[order[i]];
    }
    Tensor out = make_view(*this, new_shape, new_strides, storage_offset());
    // forward: out dim i = x dim order[i], so dx = dout permuted by the inverse.
    if (needs_grad(*this)) {
        Shape inverse(order.size());
        for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
        attach(out, "PermuteBackward0", {*this},
               [inverse](const Tensor& dout) -> Grads { return {dout.permute(inverse)}; });
    }
    return out;
}

Tensor Tensor::unsqueeze(int64_t dim) const {
    int64_t d = wrap_dim(dim, this->dim() + 1, "unsqueeze");
    Shape new_shape = shape();
    Shape new_strides = strides();
    // Any stride works for a size-1 dim; PyTorch's choice keeps views contiguous.
    int64_t stride = d >= this->dim() ? 1 : shape()[d] * strides()[d];
    new_shape.insert(new_shape.begin() + d, 1);
    new_strides.insert(new_strides.begin() + d, stride);
    Tensor out = make_view(*this, new_shape, new_strides, storage_offset());
    // forward: out = x with a size-1 dim inserted at d, so dx = dout without it.
    if (needs_grad(*this))
        attach(out, "UnsqueezeBackward0", {*this}, [d](const Tensor& dout) -> Grads { return {dout.squeeze(d)}; });
    return out;
}

// Drops the size-1 dims for which keep(d) is false.
static Tensor squeeze_dims(const Tensor& x, const std::vector<bool>& drop, const char* grad_name) {
    Shape new_shape, new_strides;
    for (int64_t d = 0; d < x.dim(); ++d) {
        if (drop[d]) continue;
        new_shape.push_back(x.shape()[d]);
        new_strides.push_back(x.strides()[d]);
    }
    Tensor out = make_view(x, new_shape, new_strides, x.storage_offset());
    // forward: out = x without some size-1 dims, so dx = dout reshaped back.
    if (needs_grad(x))
        attach(out, grad_name, {x}, [in = x.shape()](const Tensor& dout) -> Grads { return {dout.reshape(in)}; });
    return out;
}

Tensor Tensor::squeeze() const {
    std::vector<bool> drop(dim());
    for (int64_t d = 0; d < dim(); ++d) drop[d] = shape()[d] == 1;
    return squeeze_dims(*this, drop, "SqueezeBackward0");
}

Tensor Tensor::squeeze(int64_t dim) const {
    int64_t d = wrap_dim(dim, this->dim(), "squeeze");
    std::vector<bool> drop(this->dim(), false);
    if (this->dim() > 0) drop[d] = shape()[d] == 1;
    return squeeze_dims(*this, drop, "SqueezeBackward1");
}

// ---- slicing: narrow, slice, select, index ----------------------------------------------

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) const {
    if (this->dim() == 0) fail<IndexError>("slice", "cannot slice a 0-dimensional tensor");
    int64_t d = wrap_dim(dim, this->dim(), "slice");
    if (step <= 0) fail<ValueError>("slice", "step must be positive, got ", step);
    // Python's rules: negative positions count from the end, and positions
    // beyond either end are clamped to it.
    int64_t size = shape()[d];
    auto clamp = [size](int64_t pos) {
        if (pos < 0) pos += size;
        return std::clamp<int64_t>(pos, 0, size);
    };
    int64_t begin = start ? clamp(*start) : 0;
    int64_t end = stop ? clamp(*stop) : size;
    int64_t length = end > begin ? (end - begin - 1) / step + 1 : 0; // ceil((end - begin) / step)

    Shape new_shape = shape();
    Shape new_strides = strides();
    new_shape[d] = length;
    // With two or more elements, step < size, so the product cannot overflow;
    // with fewer, the stride is never used.
    new_strides[d] = length > 1 ? strides()[d] * step : strides()[d];
    Tensor out = make_view(*this, new_shape, new_strides, storage_offset() + begin * strides()[d]);
    // forward: out = x[begin:end:step] along d, so dx is zero except there, where it is dout.
    if (needs_grad(*this))
        attach(out, "SliceBackward0", {*this},
               [in = shape(), dtype = dtype(), d, begin, end, step](const Tensor& dout) -> Grads {
                   Tensor dx = zeros(in, dtype);
                   dx.slice(d, begin, end, step).copy_(dout);
                   return {dx};
               });
    return out;
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
    if (this->dim() == 0) fail<IndexError>("narrow", "cannot narrow a 0-dimensional tensor");
    int64_t d = wrap_dim(dim, this->dim(), "narrow");
    int64_t size = shape()[d];
    if (start < -size || start > size)
        fail<IndexError>("narrow", "start ", start, " is out of range for dimension ", dim, " of size ", size,
                         " (shape ", shape(), ")");
    if (start < 0) start += size;
    if (length < 0 || length > size - start)
        fail<IndexError>("narrow", "start ", start, " + length ", length, " exceeds dimension ", dim, " of size ", size,
                         " (shape ", shape(), ")");
    return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
    if (this->dim() == 0) fail<IndexError>("select", "cannot index a 0-dimensional tensor");
    int64_t d = wrap_dim(dim, this->dim(), "select");
    int64_t size = shape()[d];
    if (index < -size || index >= size)
        fail<IndexError>("select", "index ", index, " is out of range for dimension ", dim, " of size ", size,
                         " (shape ", shape(), ")");
    int64_t i = index < 0 ? index + size : index;
    Shape new_shape = shape();
    Shape new_strides = strides();
    new_shape.erase(new_shape.begin() + d);
    new_strides.erase(new_strides.begin() + d);
    Tensor out = make_view(*this, new_shape, new_strides, storage_offset() + i * strides()[d]);
    // forward: out = x[..., i, ...] along d, so dx is zero except at i, where it is dout.
    if (needs_grad(*this))
        attach(out, "SelectBackward0", {*this}, [in = shape(), dtype = dtype(), d, i](const Tensor& dout) -> Grads {
            Tensor dx = zeros(in, dtype);
            dx.select(d, i).copy_(dout);
            return {dx};
        });
    return out;
}

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
    if (static_cast<int64_t>(indices.size()) > dim())
        fail<IndexError>("index", "too many indices (", indices.size(), ") for a tensor of shape ", shape());
    // Apply the entries left to right; a Slice keeps its dim, an int drops it.
    Tensor out = *this;
    int64_t d = 0;
    for (const TensorIndex& entry : indices) {
        if (const auto* i = std::get_if<int64_t>(&entry)) {
            out = out.select(d, *i);
        } else {
            const Slice& s = std::get<Slice>(entry);
            out = out.slice(d, s.start, s.stop, s.step);
            ++d;
        }
    }
    return out;
}

// ---- expand, contiguous ----------------------------------------------------------------

Tensor Tensor::expand(const Shape& shape) const {
    int64_t ndim = static_cast<int64_t>(shape.size());
    if (ndim < dim())
        fail<ShapeError>("expand", "cannot expand a tensor of shape ", this->shape(), " to ", shape,
                         " (fewer dimensions)");
    Shape new_shape(ndim), new_strides(ndim);
    for (int64_t i = ndim - 1; i >= 0; --i) {
        int64_t j = i - (ndim - dim()); // the matching dim of this tensor, if any
        int64_t want = shape[i];
        if (j < 0) { // a new leading dim: every index reads the same data
            if (want < 0)
                fail<ShapeError>("expand", "-1 is not allowed for the new leading dimension ", i, " in ", shape);
            new_shape[i] = want;
            new_strides[i] = 0;
            continue;
        }
        int64_t have = this->shape()[j];
        if (want == -1) want = have;
        if (want == have) {
            new_shape[i] = have;
            new_strides[i] = strides()[j];
        } else if (have == 1 && want >= 0) {
            new_shape[i] = want;
            new_strides[i] = 0; // a broadcast dim: stride 0 repeats the one element
        } else {
            fail<ShapeError>("expand", "cannot expand a tensor of shape ", this->shape(), " to ", shape, ": size ",
                             have, " at dimension ", j, " is not 1");
        }
    }
    if (new_shape == this->shape()) return *this;
    check_sizes(new_shape, "expand");
    Tensor out = make_view(*this, new_shape, new_strides, storage_offset());
    // forward: out repeats x along broadcast dims, so dx sums dout over them.
    if (needs_grad(*this))
        attach(out, "ExpandBackward0", {*this},
               [in = this->shape()](const Tensor& dout) -> Grads { return {sum_to(dout, in)}; });
    return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

// ---- chunk, split: several narrow views ----------------------------------------------------

// The one node behind all the pieces of a split, as PyTorch's SplitBackward0:
// forward: piece i = x[..., start_i : start_i + size_i, ...] along d, so dx is
// the pieces' gradients side by side, and zero where a piece got none. One
// buffer for all of them; a narrow's own backward would zero a whole x-sized
// gradient per piece and add them up.
class SplitNode : public Node {
public:
    SplitNode(const char* name, const Tensor& x, int64_t d, Shape sizes)
        : Node({x}), name_(name), d_(d), sizes_(std::move(sizes)) {}
    std::string name() const override { return name_; }
    size_t num_outputs() const override { return sizes_.size(); }
    Grads apply(const Tensor& dout) override { return apply_outputs({dout}); }
    Grads apply_outputs(const std::vector<Tensor>& douts) override {
        // The fast path: the pieces' gradients may already lie side by side,
        // as the pieces do in x (FlashAttention's dq, dk and dv of a split
        // qkv); then they are dx seen whole, with nothing to copy.
        if constexpr (internal::kFastKernelsBuilt)
            if (internal::use_fast_kernels())
                if (Tensor whole =
                        internal::fast::split_gradient_whole(douts, sizes_, d_, input_shape(0), input_dtype(0));
                    whole.defined())
                    return {whole};
        Tensor dx = empty(input_shape(0), input_dtype(0));
        int64_t start = 0;
        for (size_t i = 0; i < sizes_.size(); ++i) {
            Tensor place = dx.narrow(d_, start, sizes_[i]);
            if (douts[i].defined()) place.copy_(douts[i]);
            else place.zero_();
            start += sizes_[i];
        }
        return {dx};
    }

private:
    const char* name_;
    int64_t d_;
    Shape sizes_;
};

// The pieces of x along d, of the given sizes (which add up to x's size there).
static std::vector<Tensor> split_pieces(const Tensor& x, int64_t d, const Shape& sizes, const char* grad_name) {
    std::vector<Tensor> pieces;
    {
        NoGradGuard no_grad; // each narrow would record a node of its own
        int64_t start = 0;
        for (int64_t s : sizes) {
            pieces.push_back(x.narrow(d, start, s));
            start += s;
        }
    }
    if (needs_grad(x)) attach_outputs(pieces, std::make_shared<SplitNode>(grad_name, x, d, sizes));
    return pieces;
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
    if (this->dim() == 0) fail<IndexError>("split", "cannot split a 0-dimensional tensor");
    int64_t d = wrap_dim(dim, this->dim(), "split");
    int64_t size = shape()[d];
    if (split_size <= 0 && !(split_size == 0 && size == 0))
        fail<ValueError>("split", "split_size must be positive, got ", split_size, " for shape ", shape());
    if (size == 0) return {*this};
    Shape sizes;
    for (int64_t start = 0; start < size; start += split_size) sizes.push_back(std::min(split_size, size - start));
    return split_pieces(*this, d, sizes, "SplitBackward0");
}

std::vector<Tensor> Tensor::split(const Shape& split_sizes, int64_t dim) const {
    if (this->dim() == 0) fail<IndexError>("split", "cannot split a 0-dimensional tensor");
    int64_t d = wrap_dim(dim, this->dim(), "split");
    int64_t total = 0;
    for (int64_t s : split_sizes) {
        if (s < 0) fail<ValueError>("split", "negative size in split sizes ", split_sizes);
        if (s > shape()[d] - total) { // stop before the sum can overflow
            total = -1;
            break;
        }
        total += s;
    }
    if (total != shape()[d])
        fail<ShapeError>("split", "split sizes ", split_sizes, " do not add up to dimension ", dim, " of shape ",
                         shape(), ", which has size ", shape()[d]);
    return split_pieces(*this, d, split_sizes, "SplitWithSizesBackward0");
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
    if (chunks <= 0) fail<ValueError>("chunk", "number of chunks must be positive, got ", chunks);
    if (this->dim() == 0) fail<IndexError>("chunk", "cannot chunk a 0-dimensional tensor");
    int64_t size = shape()[wrap_dim(dim, this->dim(), "chunk")];
    // Equal pieces of ceil(size / chunks), the last one smaller (as PyTorch).
    int64_t split_size = size / chunks + (size % chunks != 0); // ceil(size / chunks), without overflow
    return split(std::max<int64_t>(split_size, size == 0 ? 0 : 1), dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) { return x.chunk(chunks, dim); }
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) { return x.split(split_size, dim); }
std::vector<Tensor> split(const Tensor& x, const Shape& split_sizes, int64_t dim) { return x.split(split_sizes, dim); }

} // namespace ember
