// Shape arithmetic: see shape.h.
// Tests: tests/test_views.cpp, tests/test_binary.cpp.
#include "core/tensor/shape.h"

#include <limits>

namespace ember {

int64_t shape_numel(const Shape& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

Shape contiguous_strides(const Shape& shape) {
    Shape strides(shape.size());
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= std::max<int64_t>(shape[i], 1);
    }
    return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
    // A scalar still accepts dim 0 and -1, as in PyTorch.
    int64_t range = std::max<int64_t>(ndim, 1);
    if (dim < -range || dim >= range)
        fail<IndexError>(op, "dimension ", dim, " is out of range for a tensor with ", ndim, " dimensions (expected ",
                         -range, " to ", range - 1, ")");
    return dim < 0 ? dim + range : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        // Line the shapes up from the right; a missing dimension counts as 1.
        int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
        int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (sa != sb && sa != 1 && sb != 1)
            fail<ShapeError>(op, "shapes ", a, " and ", b, " do not broadcast: size ", sa, " vs ", sb, " at dimension ",
                             static_cast<int64_t>(i) - static_cast<int64_t>(n));
        out[i] = sa == 1 ? sb : sa;
    }
    return out;
}

void check_sizes(const Shape& shape, const char* op) {
    // Guard the product too: an element count (times 8 bytes, the largest
    // element) that overflows would wrap around and allocate a tiny buffer.
    // The non-zero sizes are bounded even when another size is 0, since the
    // strides are their products.
    for (int64_t s : shape)
        if (s < 0) fail<ValueError>(op, "negative size in shape ", shape);
    int64_t n = 1;
    for (int64_t s : shape) {
        if (s == 0) continue;
        if (n > kMaxNumel / s) fail<ValueError>(op, "shape ", shape, " has too many elements");
        n *= s;
    }
}

} // namespace ember
