// Every tensor operation ember offers, as free functions named as in PyTorch.
//
// Differentiable ops record a backward node when an input requires grad; the
// forward and backward of each op sit together in the .cpp file named in its
// section. Binary ops broadcast (core/tensor/shape.h); dims may be negative. Each op
// validates its arguments first and throws a typed ember::Error naming itself
// and every shape involved. Tests: one tests/test_<family>.cpp per section,
// matched to PyTorch through tests/fixtures/make_fixtures.py.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/random/generator.h"
#include "core/tensor/tensor.h"
#include "core/tensor/tensor_literal.h"

namespace ember {

// ---- factories (core/tensor/factory.cpp) --------------------------------------------
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
// dtype: int64 for an integral value, bool for a bool, else float32 (as PyTorch).
Tensor full(const Shape& shape, Scalar value, TensorOptions options = {});
// 0, 1, ..., end-1 and start, start+step, ... < end: int64 when all three are
// integers, else float32 (as PyTorch).
Tensor arange(Scalar end, TensorOptions options = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});
Tensor empty_like(const Tensor& other, TensorOptions options = {});
Tensor zeros_like(const Tensor& other, TensorOptions options = {});
Tensor ones_like(const Tensor& other, TensorOptions options = {});
Tensor full_like(const Tensor& other, Scalar value, TensorOptions options = {});

// from_vector(values, shape) and tensor({{1.f, 2.f}, {3.f, 4.f}}): tensors
// from C++ values, declared in core/tensor/tensor_literal.h.
// A 0-dimensional tensor.
Tensor scalar_tensor(Scalar value, TensorOptions options = {});

// ---- random factories, bit-identical to PyTorch's CPU generator (core/random/)
// `generator` null means the default generator that manual_seed seeds.
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = {},
               Generator* generator = nullptr);
Tensor randint(int64_t high, const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);
Tensor rand_like(const Tensor& other, Generator* generator = nullptr);
Tensor randn_like(const Tensor& other, Generator* generator = nullptr);
// Bernoulli draws with per-element probabilities p (a float tensor in [0, 1]).
Tensor bernoulli(const Tensor& p, Generator* generator = nullptr);
// Indices sampled from each row of `probs` (1-D or 2-D, non-negative weights).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false, Generator* generator = nullptr);

// ---- elementwise (core/ops/binary.cpp, compare.cpp, unary.cpp; add_ ...: inplace.cpp) -
// The dtype a binary op between a and b computes in (PyTorch's result_type:
// promotion over bool < int64 < float32 < float64, where a 0-d tensor only
// counts if it is of a higher category than the others).
DType result_type(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, Scalar b);
Tensor sub(Scalar a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
// Python's `a / b` for a number a: b.reciprocal() * a, as torch.Tensor.__rtruediv__
// computes it (so `10.0 / f` records MulBackward0 over ReciprocalBackward0, and
// rounds twice, as PyTorch does).
Tensor div(Scalar a, const Tensor& b);
Tensor pow(const Tensor& x, Scalar exponent);
// base^exponent elementwise: torch.pow(10000.0, t), Python's 10000.0 ** t.
Tensor pow(Scalar base, const Tensor& exponent);
// a (N) and b (M) -> (N,M) with out[i][j] = a[i] * b[j] (torch.outer).
Tensor outer(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x); // 1 / x, in x's floating dtype (float32 for integers)
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: "none" for the exact erf form, "tanh" for GPT-2's tanh form.
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor abs(const Tensor& x);
// In radians; the angles of sinusoidal and rotary position embeddings.
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);

// Comparisons give bool masks.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, Scalar b);

// True when a and b (broadcast) agree everywhere: |a - b| <= atol + rtol * |b|,
// NaN never equal (torch.allclose).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

// Where mask (bool, broadcast against x) is true, `value`; elsewhere x.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
// Elementwise cond ? a : b, all three broadcast together.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, Scalar b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, Scalar b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, Scalar b);

// ---- reductions (core/ops/reduce.cpp: sums; extrema.cpp: max, min, topk) ------------
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
// Unbiased (divides by N-1) unless unbiased is false, as PyTorch's default.
// var(x) is over all elements; var(x, {}, false) is its biased form.
Tensor var(const Tensor& x);
Tensor var(const Tensor& x, int64_t dim, bool unbiased = true, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims, bool unbiased = true, bool keepdim = false);
Tensor max(const Tensor& x);
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// The k largest (or smallest) entries along dim, sorted, with their indices.
// NaN counts as the largest; ties go to the lower index.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
// Sums a gradient of a broadcast shape back down to `shape` (autograd helper).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- matmul, linear (core/ops/matmul.cpp, linear.cpp; the 2-D product in core/ops/matmul.h) --
// PyTorch's full semantics: 1-D @ 1-D is a dot product, 2-D @ 2-D a matrix
// product, and higher ranks batch over the leading dims, broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// PyTorch's F.linear: x (..., in) @ weight^T + bias, weight (out, in), bias
// (out) or undefined; the same bits as matmul(x, weight.t()) + bias, in one
// pass and one autograd node (what nn::Linear runs).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- softmax, layer_norm, cross_entropy, dropout (core/ops/, a file each) ----------
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Attention's scores-to-weights lines in one pass over the last dim:
//   softmax(masked_fill(x * scale, masked_out, -inf), -1)
// with the same bits as those ops one by one, forward and backward. x is
// (..., T, T) scores, e.g. (B,NH,T,T); masked_out is bool, true where a
// score is masked out (masked_fill's convention; scaled_dot_product_attention's
// is the opposite), broadcastable to x, e.g. (T,T), or undefined; scale > 0.
Tensor scaled_masked_softmax(const Tensor& x, const Tensor& masked_out, double scale);
// logits (N,C) float, targets (N) int64 in [0, C) or ignore_index; mean over
// the targets that are not ignored.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// Normalises over the trailing dims `normalized_shape` to zero mean and unit
// variance, then scales by weight and shifts by bias (either may be undefined).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// Zeroes each element with probability p and scales the rest by 1/(1-p), when
// training; the identity otherwise. Same masks as PyTorch for the same seed.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* generator = nullptr);

// ---- attention (core/ops/attention.cpp) ----------------------------------------------
// PyTorch 2's F.scaled_dot_product_attention: for query (..., L, E), key
// (..., S, E) and value (..., S, Ev), leading dims broadcast,
//   dropout(softmax(query @ key^T * scale + mask), dropout_p) @ value  -> (..., L, Ev)
// with scale = 1/sqrt(E) unless given. The mask is `allowed`, PyTorch's
// attn_mask (bool: true where a query may attend to a key, the opposite of
// scaled_masked_softmax's convention; or float, added to the scores;
// broadcastable to (..., L, S)) or, with is_causal, key j <= query i; not
// both. Computed without storing the (L,S) weights (FlashAttention), so its
// memory grows with L, not L*S; the backward recomputes them. Dropout drops
// the weights F.dropout would drop with the same generator state, and it is
// applied whenever dropout_p > 0 (pass 0 in eval mode, as PyTorch's modules do).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& allowed = {}, double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt, Generator* generator = nullptr);

// ---- joining, splitting, indexing (core/ops/index.cpp; chunk and split are views, in
// core/tensor/view.cpp) ---------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const Shape& split_sizes, int64_t dim = 0);
// The lower (tril) or upper (triu) triangle of the last two dims; the rest 0.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// The entries of x at `index` (1-D int64) along dim.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// Each entry of x `repeats` times in a row along dim ([a, b] -> [a, a, b, b]);
// without dim, over the flattened x (torch.repeat_interleave).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
// Rows of weight (V,C) picked by input (any shape, int64): (*input.shape, C).
Tensor embedding(const Tensor& input, const Tensor& weight);

} // namespace ember
