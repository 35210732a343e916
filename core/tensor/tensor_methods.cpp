// Tensor's math methods: each one calls the free function of the same name in
// core/ops/ops.h, so x.sum(1, true) and sum(x, 1, true) are the same op.
// Tests: the op tests call both forms (tests/test_reduce.cpp, ...).
#include "core/ops/ops.h"

namespace ember {

Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }
Tensor Tensor::pow(Scalar exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::tanh() const { return ember::tanh(*this); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::sin() const { return ember::sin(*this); }
Tensor Tensor::cos() const { return ember::cos(*this); }
Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return ember::sum(*this, dim, keepdim); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return ember::mean(*this, dim, keepdim); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }
Tensor Tensor::var() const { return ember::var(*this); }
Tensor Tensor::var(int64_t dim, bool unbiased, bool keepdim) const { return ember::var(*this, dim, unbiased, keepdim); }
Tensor Tensor::max() const { return ember::max(*this); }
ValuesIndices Tensor::max(int64_t dim, bool keepdim) const { return ember::max(*this, dim, keepdim); }
Tensor Tensor::min() const { return ember::min(*this); }
ValuesIndices Tensor::min(int64_t dim, bool keepdim) const { return ember::min(*this, dim, keepdim); }
ValuesIndices Tensor::topk(int64_t k, int64_t dim, bool largest) const { return ember::topk(*this, k, dim, largest); }
Tensor Tensor::argmax() const { return ember::argmax(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return ember::argmax(*this, dim, keepdim); }
Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ember::log_softmax(*this, dim); }
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const { return ember::masked_fill(*this, mask, value); }
Tensor Tensor::tril(int64_t diagonal) const { return ember::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return ember::triu(*this, diagonal); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return ember::index_select(*this, dim, index); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
    return ember::repeat_interleave(*this, repeats, dim);
}

} // namespace ember
