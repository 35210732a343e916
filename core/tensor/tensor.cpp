// Tensor's accessors, copies and conversions: the parts of tensor.h that are
// neither views (view.cpp), math (core/ops/) nor autograd
// (core/autograd/autograd.cpp); and the private helpers of internal.h.
// Tests: tests/test_tensor.cpp.
#include "core/tensor/tensor.h"

#include <cmath>

#include "core/autograd/autograd.h"
#include "core/loops/arithmetic.h"
#include "core/loops/iter.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

int64_t Tensor::size(int64_t dim) const {
    const TensorImpl& self = checked();
    if (self.shape.empty()) fail<IndexError>("size", "a 0-dimensional tensor has no dimension ", dim);
    return self.shape[wrap_dim(dim, this->dim(), "size")];
}

int64_t Tensor::stride(int64_t dim) const {
    const TensorImpl& self = checked();
    if (self.shape.empty()) fail<IndexError>("stride", "a 0-dimensional tensor has no dimension ", dim);
    return self.strides[wrap_dim(dim, this->dim(), "stride")];
}

int64_t Tensor::numel() const { return shape_numel(checked().shape); }

bool Tensor::is_contiguous() const {
    // Contiguous means row-major with no gaps; size-1 dims may have any stride.
    const TensorImpl& self = checked();
    int64_t expected = 1;
    for (size_t i = self.shape.size(); i-- > 0;) {
        if (self.shape[i] == 1) continue;
        if (self.shape[i] == 0) return true;
        if (self.strides[i] != expected) return false;
        expected *= self.shape[i];
    }
    return true;
}

template <typename T>
T Tensor::item() const {
    if (numel() != 1)
        fail<ValueError>("item", "a tensor with ", numel(), " elements of shape ", shape(),
                         " cannot be converted to a single value");
    return dispatch(dtype(), [&]<typename S>(TypeTag<S>) {
        return internal::cast_value<T>(static_cast<const S*>(storage()->data())[storage_offset()]);
    });
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;

DType result_type(const Tensor& a, const Tensor& b) {
    // PyTorch's rule: tensors with dimensions decide the dtype; a 0-d tensor
    // raises it only when it is of a higher category (bool < integer <
    // floating), so ones({3}) * scalar_tensor(2.0, kFloat64) stays float32.
    bool zero_a = a.dim() == 0, zero_b = b.dim() == 0;
    if (zero_a == zero_b) return promote_types(a.dtype(), b.dtype());
    DType dimensioned = zero_a ? b.dtype() : a.dtype();
    DType zero_dim = zero_a ? a.dtype() : b.dtype();
    auto category = [](DType t) { return t == kBool ? 0 : is_floating(t) ? 2 : 1; };
    return category(zero_dim) > category(dimensioned) ? promote_types(dimensioned, zero_dim) : dimensioned;
}

namespace internal {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = base.storage();
    impl->shape = std::move(shape);
    impl->strides = std::move(strides);
    impl->offset = offset;
    impl->dtype = base.dtype();
    impl->view_base = base.impl()->view_base ? base.impl()->view_base : base.impl_ptr();
    impl->view_history_version = base.storage()->history_version();
    return Tensor(std::move(impl));
}

void copy_elements(const Tensor& dst, const Tensor& src) {
    if (dst.numel() == 0) return;
    StridedLayout<2> layout(dst.shape(), {&dst.strides(), &src.strides()});
    dispatch(dst.dtype(), [&]<typename D>(TypeTag<D>) {
        dispatch(src.dtype(), [&]<typename S>(TypeTag<S>) {
            D* out = static_cast<D*>(dst.storage()->data()) + dst.storage_offset();
            const S* in = static_cast<const S*>(src.storage()->data()) + src.storage_offset();
            const Shape& size = layout.shape;
            const std::array<Shape, 2>& stride = layout.strides;
            if (size.size() == 2 && stride[0][1] == 1 && stride[1][0] == 1) {
                // A transpose (.t().contiguous(), a checkpoint's Conv1D weights):
                // row by row, every read would land on a new cache line; tile
                // by tile, each line read serves a whole tile row.
                constexpr int64_t kTile = 32;
                const int64_t rows = size[0], cols = size[1], out_row = stride[0][0], in_col = stride[1][1];
                parallel_for(0, (rows + kTile - 1) / kTile, std::max<int64_t>(1, kElementwiseGrain / (kTile * cols)),
                             [&](int64_t tile_begin, int64_t tile_end) {
                                 for (int64_t r0 = tile_begin * kTile; r0 < std::min(rows, tile_end * kTile);
                                      r0 += kTile)
                                     for (int64_t c0 = 0; c0 < cols; c0 += kTile)
                                         for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
                                             for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
                                                 out[r * out_row + c] = cast_value<D>(in[r + c * in_col]);
                             });
                return;
            }
            parallel_for_each_run(layout, dst.numel(), [&](auto off, auto step, int64_t n) {
                for (int64_t i = 0; i < n; ++i) out[off[0] + i * step[0]] = cast_value<D>(in[off[1] + i * step[1]]);
            });
        });
    });
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
    Shape strides(shape.size(), 0);
    size_t lead = shape.size() - t.shape().size();
    for (size_t i = 0; i < t.shape().size(); ++i) strides[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
    return strides;
}

Tensor converted(const Tensor& t, DType dtype) {
    if (t.dtype() == dtype) return t;
    Tensor out = empty_for("to", t.shape(), dtype);
    copy_elements(out, t);
    return out;
}

Tensor contiguous_data(const Tensor& t) {
    if (t.is_contiguous()) return t;
    Tensor out = empty_for("contiguous", t.shape(), t.dtype());
    copy_elements(out, t);
    return out;
}

void check_writable(const Tensor& t, const char* op) {
    for (int64_t d = 0; d < t.dim(); ++d)
        if (t.strides()[d] == 0 && t.shape()[d] > 1)
            fail<ValueError>(op, "cannot write in place to an expanded tensor of shape ", t.shape(), " (strides ",
                             t.strides(), "): several of its elements share one memory location; clone() it first");
}

Tensor unaliased(const Tensor& src, const Tensor& dst) {
    if (src.storage() != dst.storage()) return src;
    Tensor copy = empty_for("copy_", src.shape(), src.dtype());
    copy_elements(copy, src);
    return copy;
}

void check_floating(const Tensor& t, const char* op, const char* what) {
    if (!t.is_floating_point())
        fail<DTypeError>(op, what, " must be float32 or float64, got ", dtype_name(t.dtype()), " of shape ", t.shape());
}

DimSplit split_at(const Shape& shape, int64_t dim) {
    DimSplit s;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
        if (d < dim) s.outer *= shape[d];
        else if (d == dim) s.size = shape[d];
        else s.inner *= shape[d];
    }
    return s;
}

} // namespace internal

Tensor Tensor::clone() const {
    // forward: out = x (a contiguous copy), so dx = dout.
    Tensor out = internal::empty_for("clone", shape(), dtype());
    internal::copy_elements(out, *this);
    if (needs_grad(*this)) attach(out, "CloneBackward0", {*this}, [](const Tensor& dout) -> Grads { return {dout}; });
    return out;
}

Tensor Tensor::to(DType target) const {
    if (target == dtype()) return *this;
    Tensor out = internal::empty_for("to", shape(), target);
    internal::copy_elements(out, *this);
    // forward: out = cast(x), so dx = dout cast back. A cast to int64 or bool
    // is not differentiable: its result simply does not require grad.
    DType source = dtype();
    if (needs_grad(*this) && is_floating(target))
        attach(out, "ToCopyBackward0", {*this}, [source](const Tensor& dout) -> Grads { return {dout.to(source)}; });
    return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
    if (broadcast_shapes(shape(), src.shape(), "copy_") != shape())
        fail<ShapeError>("copy_", "source of shape ", src.shape(), " does not broadcast to the destination's shape ",
                         shape());
    bool grad = needs_grad(*this, src);
    check_inplace(*this, "copy_", grad);
    internal::check_writable(*this, "copy_");
    // Read src broadcast to self's shape (stride 0, no autograd view), from a
    // copy if it shares memory with self (x.copy_(x.t()) would read its own writes).
    Tensor from = internal::unaliased(src, *this);
    Shape from_strides = internal::broadcast_strides(from, shape());
    internal::copy_elements(*this, internal::make_view(from, shape(), from_strides, from.storage_offset()));
    internal::bump_version(*this);
    // forward: self = src (broadcast), so dself_old = 0 and dsrc = sum_to(dout).
    if (grad) {
        Shape src_shape = src.shape();
        DType src_dtype = src.dtype();
        attach_inplace(*this, "CopyBackwards", {*this, src}, [src_shape, src_dtype](const Tensor& dout) -> Grads {
            return {Tensor(), sum_to(dout, src_shape).to(src_dtype)};
        });
    }
    return *this;
}

Tensor& Tensor::fill_(Scalar value) {
    check_inplace(*this, "fill_", requires_grad());
    internal::check_writable(*this, "fill_");
    if (!value.fits(dtype()))
        fail<ValueError>("fill_", "value ", value.to_double(), " cannot be converted to ", dtype_name(dtype()),
                         " without overflow (tensor ", shape(), ")");
    // The value is converted to the tensor's dtype, as PyTorch does.
    if (numel() > 0) {
        internal::StridedLayout<1> layout(shape(), {&strides()});
        dispatch(dtype(), [&]<typename T>(TypeTag<T>) {
            T* data = static_cast<T*>(storage()->data()) + storage_offset();
            T v = value.to<T>();
            internal::parallel_for_each_run(layout, numel(), [&](auto off, auto step, int64_t n) {
                for (int64_t i = 0; i < n; ++i) data[off[0] + i * step[0]] = v;
            });
        });
    }
    internal::bump_version(*this);
    record_overwrite(*this, "FillBackward2");
    return *this;
}

} // namespace ember
