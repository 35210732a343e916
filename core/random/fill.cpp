// The helpers every random fill shares: see fill.h. Tests: tests/test_random.cpp.
#include "core/random/fill.h"

#include <algorithm>

#include "core/autograd/autograd.h"
#include "core/ops/ops.h"

namespace ember::internal {

Shape memory_order(const Tensor& t) {
    Shape order(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.strides()[a] > t.strides()[b]; });
    return order;
}

bool is_non_overlapping_and_dense(const Tensor& t) {
    // Walk the dims from the smallest stride up: each dim of size > 1 must
    // step exactly over the block the faster dims cover.
    Shape order = memory_order(t);
    int64_t expected = 1;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        int64_t size = t.shape()[*it];
        if (size == 1) continue;
        if (size == 0) return true;
        if (t.strides()[*it] != expected) return false;
        expected *= size;
    }
    return true;
}

Tensor empty_preserving_layout(const Tensor& like, DType dtype, const char* op) {
    if (like.is_contiguous() || !is_non_overlapping_and_dense(like)) return empty_for(op, like.shape(), dtype);
    // A dense permuted layout: strides as like's, over a fresh buffer that
    // starts at the lowest address (offset 0).
    auto impl = std::make_shared<TensorImpl>();
    impl->dtype = dtype;
    impl->shape = like.shape();
    impl->strides = like.strides();
    impl->storage = std::make_shared<Storage>(static_cast<size_t>(like.numel()) * element_size(dtype), op);
    return Tensor(std::move(impl));
}

void check_fill_target(const Tensor& t, const char* op) {
    check_inplace(t, op, t.requires_grad());
    check_writable(t, op);
}

void finish_fill(const Tensor& t, const char* grad_name) {
    bump_version(t);
    record_overwrite(t, grad_name);
}

} // namespace ember::internal
