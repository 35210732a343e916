// Factories: tensors made from sizes, from values, or from ranges.
//
// Every factory returns a fresh contiguous tensor that owns its storage.
// Dtypes follow PyTorch: float32 unless given, except that full, arange and
// tensor({...}) infer int64, float32 or bool from their values.
// The random factories live in core/random/. Tests: tests/test_factory.cpp.
#include <cmath>

#include "core/autograd/autograd.h"
#include "core/loops/arithmetic.h"
#include "core/ops/ops.h"
#include "core/tensor/internal.h"
#include "core/tensor/shape.h"

namespace ember {

static Tensor finish(Tensor t, const TensorOptions& options) {
    if (options.requires_grad()) t.requires_grad_(true);
    return t;
}

Tensor internal::empty_for(const char* op, const Shape& shape, DType dtype) {
    check_sizes(shape, op); // so the byte count below cannot overflow
    auto impl = std::make_shared<TensorImpl>();
    impl->dtype = dtype;
    impl->shape = shape;
    impl->strides = contiguous_strides(shape);
    impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * element_size(dtype), op);
    return Tensor(std::move(impl));
}

Tensor empty(const Shape& shape, TensorOptions options) {
    return finish(internal::empty_for("empty", shape, options.dtype_or(kFloat32)), options);
}

// A fresh tensor filled with `value`, without autograd (made before requires_grad is set).
static Tensor filled(const char* op, const Shape& shape, DType dtype, Scalar value) {
    if (!value.fits(dtype))
        fail<ValueError>(op, "value ", value.to_double(), " cannot be converted to ", dtype_name(dtype),
                         " without overflow (shape ", shape, ")");
    Tensor t = internal::empty_for(op, shape, dtype);
    t.fill_(value);
    return t;
}

static DType dtype_of_scalar(Scalar value) {
    if (value.is_bool()) return kBool;
    return value.is_integral() ? kInt64 : kFloat32;
}

Tensor zeros(const Shape& shape, TensorOptions options) {
    return finish(filled("zeros", shape, options.dtype_or(kFloat32), 0), options);
}

Tensor ones(const Shape& shape, TensorOptions options) {
    return finish(filled("ones", shape, options.dtype_or(kFloat32), 1), options);
}

Tensor full(const Shape& shape, Scalar value, TensorOptions options) {
    return finish(filled("full", shape, options.dtype_or(dtype_of_scalar(value)), value), options);
}

Tensor scalar_tensor(Scalar value, TensorOptions options) { return full({}, value, options); }

Tensor empty_like(const Tensor& other, TensorOptions options) {
    return empty(other.shape(), options.dtype(options.dtype_or(other.dtype())));
}
Tensor zeros_like(const Tensor& other, TensorOptions options) {
    return zeros(other.shape(), options.dtype(options.dtype_or(other.dtype())));
}
Tensor ones_like(const Tensor& other, TensorOptions options) {
    return ones(other.shape(), options.dtype(options.dtype_or(other.dtype())));
}
Tensor full_like(const Tensor& other, Scalar value, TensorOptions options) {
    return full(other.shape(), value, options.dtype(options.dtype_or(other.dtype())));
}

Tensor arange(Scalar end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options) {
    double s = start.to_double(), e = end.to_double(), d = step.to_double();
    if (!std::isfinite(s) || !std::isfinite(e) || !std::isfinite(d))
        fail<ValueError>("arange", "start, end and step must be finite, got ", s, ", ", e, ", ", d);
    if (d == 0) fail<ValueError>("arange", "step must be nonzero");
    if ((d > 0 && e < s) || (d < 0 && e > s))
        fail<ValueError>("arange", "upper bound and step sign are inconsistent: start ", s, ", end ", e, ", step ", d);
    bool integral = start.is_integral() && end.is_integral() && step.is_integral();
    DType dtype = options.dtype_or(integral ? kInt64 : kFloat32);
    if (integral) {
        // Exact integer arithmetic (int64 start, end and step), as PyTorch.
        // Exact integer arithmetic, as PyTorch: count = ceil(|end - start| / |step|),
        // in unsigned 64-bit so that no difference of two int64s can overflow.
        const int64_t si = start.to<int64_t>(), ei = end.to<int64_t>(), di = step.to<int64_t>();
        const uint64_t span = di > 0 ? static_cast<uint64_t>(ei) - static_cast<uint64_t>(si)
                                     : static_cast<uint64_t>(si) - static_cast<uint64_t>(ei);
        const uint64_t magnitude = di > 0 ? static_cast<uint64_t>(di) : 0 - static_cast<uint64_t>(di);
        const uint64_t count = span / magnitude + (span % magnitude != 0);
        if (count > (uint64_t{1} << 40)) fail<ValueError>("arange", "would make ", count, " elements");
        Tensor out = internal::empty_for("arange", {static_cast<int64_t>(count)}, dtype);
        dispatch(dtype, [&]<typename T>(TypeTag<T>) {
            T* data = out.data_ptr<T>();
            // start + i * step stays within [start, end], so the wrapping sum is exact.
            for (int64_t i = 0; i < out.numel(); ++i)
                data[i] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(si) +
                                                              static_cast<uint64_t>(i) * static_cast<uint64_t>(di)));
        });
        return finish(out, options);
    }
    double count = std::ceil((e - s) / d);
    if (count > 1e12) fail<ValueError>("arange", "would make ", count, " elements");
    Tensor out = internal::empty_for("arange", {static_cast<int64_t>(count)}, dtype);
    // Each value is start + i * step computed in double, then converted once
    // (PyTorch computes in its accumulate type, double for float32).
    dispatch(dtype, [&]<typename T>(TypeTag<T>) {
        T* data = out.data_ptr<T>();
        for (int64_t i = 0; i < out.numel(); ++i) data[i] = internal::cast_value<T>(s + static_cast<double>(i) * d);
    });
    return finish(out, options);
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
    if (m == -1) m = n;
    if (n < 0 || m < 0) fail<ValueError>("eye", "sizes must be non-negative, got n=", n, ", m=", m);
    Tensor out = filled("eye", {n, m}, options.dtype_or(kFloat32), 0);
    dispatch(out.dtype(), [&]<typename T>(TypeTag<T>) {
        T* data = out.data_ptr<T>();
        for (int64_t i = 0; i < std::min(n, m); ++i) data[i * m + i] = T(1);
    });
    return finish(out, options);
}

// ---- tensors from C++ values ------------------------------------------------------------------

// The dtype PyTorch gives a Python value of the C++ type T.
template <typename T>
static constexpr DType inferred_dtype() {
    if constexpr (std::is_same_v<T, bool>) return kBool;
    else if constexpr (std::is_integral_v<T>) return kInt64;
    else return kFloat32;
}

template <typename T>
static Tensor from_values(const std::vector<T>& values, const Shape& shape, TensorOptions options) {
    Shape target = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
    check_sizes(target, "from_vector");
    if (shape_numel(target) != static_cast<int64_t>(values.size()))
        fail<ShapeError>("from_vector", values.size(), " values cannot fill shape ", target);
    Tensor out = internal::empty_for("from_vector", target, options.dtype_or(inferred_dtype<T>()));
    dispatch(out.dtype(), [&]<typename D>(TypeTag<D>) {
        D* data = out.data_ptr<D>();
        for (size_t i = 0; i < values.size(); ++i) data[i] = internal::cast_value<D>(static_cast<T>(values[i]));
    });
    return finish(out, options);
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape, TensorOptions options) {
    return from_values(values, shape, options);
}
Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions options) {
    return from_values(values, shape, options);
}
Tensor from_vector(const std::vector<int>& values, const Shape& shape, TensorOptions options) {
    return from_values(values, shape, options);
}
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape, TensorOptions options) {
    return from_values(values, shape, options);
}
Tensor from_vector(const std::vector<bool>& values, const Shape& shape, TensorOptions options) {
    return from_values(values, shape, options);
}

} // namespace ember
