// The switch between an op's definition and its fast kernel, and the fast
// kernels' entry points: all that the rest of ember sees of core/kernels/.
//
// An op computes its result by its definition: the plain loop, or the
// composition of other ops, in its op file. When the fast kernels are built
// and switched on, it may instead call one of the fast:: functions below,
// each of which computes the same result: the same bits, or where its
// contract says so, the same up to rounding. Ops call them only inside
// `if constexpr (kFastKernelsBuilt)`: a reference build (-Dkernels=reference)
// compiles none of core/kernels/, and a call in a discarded statement needs
// no definition. The switch is global, as PyTorch's torch.backends flags
// are; tests turn it off for a scope (ReferenceKernelsGuard) to compare a
// fast kernel with its definition in one process. Private (ember's files,
// tests). core/kernels/README.md lists the kernels; tests:
// tests/test_kernels.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ops/adamw.h"
#include "core/ops/attention.h"
#include "core/ops/matmul.h"
#include "core/random/generator.h"
#include "core/tensor/storage.h"
#include "core/tensor/tensor.h"

namespace ember::internal {

// True when this build contains the fast kernels (not -Dkernels=reference).
#ifdef EMBER_REFERENCE_KERNELS
inline constexpr bool kFastKernelsBuilt = false;
#else
inline constexpr bool kFastKernelsBuilt = true;
#endif

namespace fast {

// The switch itself (dispatch.cpp): on unless turned off.
bool enabled();
void set_enabled(bool on);

} // namespace fast

// True when ops should call their fast kernels: built in, and not switched off.
inline bool use_fast_kernels() {
    if constexpr (kFastKernelsBuilt) return fast::enabled();
    else return false;
}

// Switches the fast kernels off (false) or back on (true, the default). In
// a reference build they stay off.
inline void set_fast_kernels(bool on) {
    if constexpr (kFastKernelsBuilt) fast::set_enabled(on);
}

// Runs the definitions for a scope: { ReferenceKernelsGuard reference; ... }
class ReferenceKernelsGuard {
public:
    ReferenceKernelsGuard() : previous_(use_fast_kernels()) { set_fast_kernels(false); }
    ~ReferenceKernelsGuard() { set_fast_kernels(previous_); }
    ReferenceKernelsGuard(const ReferenceKernelsGuard&) = delete;
    ReferenceKernelsGuard& operator=(const ReferenceKernelsGuard&) = delete;

private:
    bool previous_;
};

// ---- the fast kernels, each with the definition it replaces ------------------------------

namespace fast {

// matmul and linear (kernels/gemm.cpp): c = a @ b, as gemm_plain
// (core/ops/matmul.cpp) computes it. float64, and float32 on an x86-64 CPU
// without FMA: the same bits. float32 on a CPU with FMA (AVX2 or not, arm64):
// each multiply-add fused (rounded once), so the last bits differ, the same
// on every such CPU; a few rows times a transposed B sum in 16 lanes. Each
// element's sum never depends on the thread count.
void gemm(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate);
void gemm(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate);

// linear's two gradient products (kernels/gemm.cpp), from g = dy (rows,
// out), the weight w (out, in) and the input x (rows, in): dx = g @ w and
// dw = g^T @ x, the bits of those two fast::gemm calls. On two threads
// each thread takes dw's sums over its own half of the rows (thread 0's
// first, thread 1 continuing them) and its own rows of dx, and a thread
// done with its own takes pieces from the end of the other's (Note [A
// Linear's gradients on two threads]). linear_gradients_runs counts the
// calls that took that path (for the tests; its loops may still run on
// one thread, Note [Threads on a busy machine]).
void linear_gradients(MatrixRef<const float> g, MatrixRef<const float> w, MatrixRef<const float> x, MatrixRef<float> dx,
                      MatrixRef<float> dw);
int64_t linear_gradients_runs();

// softmax and scaled_masked_softmax on `rows` contiguous rows of n > 0
// (kernels/softmax.cpp): the row functions of core/ops/softmax.h, for short
// rows their operations on several rows at once: the same bits. out may be
// x; mask is the bool mask (true = masked out) expanded to x's shape, or
// undefined; s the scale, applied as x * s.
template <typename T>
void softmax_last_dim(const T* x, T* out, int64_t rows, int64_t n);
template <typename T>
void scaled_masked_softmax_forward(const T* x, T* y, int64_t rows, int64_t n, const Tensor& mask, T s);
template <typename T>
void scaled_masked_softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t n, const Tensor& mask, T s);

// sum over a contiguous tensor's leading dims (kernels/column_sum.cpp):
// out[j] = sum over r in [0, rows) of x[r * cols + j], in double, in
// increasing r, as the plain reduction in core/ops/reduce.cpp sums it: the
// same bits, read row by row.
template <typename T>
void column_sum(const T* x, int64_t rows, int64_t cols, T* out);

// cross_entropy (kernels/cross_entropy.cpp): cross_entropy_forward_rows and
// cross_entropy_backward_rows of core/ops/cross_entropy.h, the same loops
// compiled for AVX2 too, the rows split between threads (the loss's sum
// still in row order): the same bits. T is float or double.
template <typename T>
double cross_entropy_forward(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                             double* lse);
template <typename T>
void cross_entropy_backward(const T* x, const int64_t* targets, int64_t n, int64_t c, int64_t ignore_index,
                            const double* lse, double scale, T* dx);

// layer_norm (kernels/layer_norm.cpp): the functions of
// core/ops/layer_norm.h run in another order of rows and columns (rows in
// blocks; dweight and dbias summed over the first half of the rows by one
// thread and continued over the rest by the other, or split by columns
// between threads): the same bits. Arguments as in
// core/ops/layer_norm.cpp's forward and backward.
template <typename T>
void layer_norm_forward(const T* x, const T* weight, const T* bias, double eps, int64_t rows, int64_t n, T* y,
                        double* mean, double* rstd);
template <typename T>
void layer_norm_backward(const T* dout, const T* x, const T* weight, const double* mean, const double* rstd,
                         int64_t rows, int64_t n, T* dx, T* dweight, T* dbias);
// How many backwards took the two-part path on two threads (Note
// [LayerNorm's backward on two threads]), for the tests.
int64_t layer_norm_backward_two_part_runs();

// dropout (kernels/dropout.cpp): the op's result for 0 < p < 1 in training,
// with the bits of its definition (core/ops/dropout.cpp) forward and
// backward, from the same draws; the mask is kept as bits.
Tensor dropout(const Tensor& x, double p, Generator* generator);

// scaled_dot_product_attention (kernels/flash_attention.cpp): the op's
// result, with its backward, for a checked call, by FlashAttention: the
// definition (core/ops/attention.cpp) up to rounding, within 1e-5 relative
// in float32 (the online softmax sums in another order), without storing
// the (L,S) weights; dropout drops the weights the definition drops for the
// same generator state.
Tensor scaled_dot_product_attention(const AttentionCall& call, const Tensor& query, const Tensor& key,
                                    const Tensor& value, Generator* generator);

// split's backward (kernels/split.cpp): x's gradient when the pieces'
// gradients douts already lie side by side in one buffer as the pieces lie
// in x (one storage, the same strides, piece i sizes[i] long along d and
// where it starts in x): that buffer seen as x's shape, a view holding the
// same values as the definition's copy (SplitNode, core/tensor/view.cpp).
// Undefined when they do not lie so. FlashAttention gives q, k and v cut
// from one tensor their gradients in one buffer for this.
Tensor split_gradient_whole(const std::vector<Tensor>& douts, const Shape& sizes, int64_t d, const Shape& x_shape,
                            DType dtype);

// bernoulli_ on a contiguous tensor (kernels/bernoulli.cpp): data[i] =
// value where u53_i < threshold, else 0, for i in [0, n), u53_i the low 53
// bits of the i-th pair of the generator's words (the first the high half):
// the draws, the values and the generator's final state of the plain loop
// in core/random/distributions.cpp. T is float, double, int64_t or bool.
template <typename T>
void bernoulli_fill(T* data, int64_t n, uint64_t threshold, T value, Generator& gen);

// The generator's two loops over its state (kernels/mersenne.cpp): the
// twist that regenerates the 624 words in place, and the tempering of n
// words (out[i] = temper(in[i])), as Generator::twist and random_words in
// core/random/generator.cpp compute them: the same words.
void mt19937_twist(uint32_t* state);
void mt19937_temper(const uint32_t* in, uint32_t* out, int64_t n);

} // namespace fast

namespace fast {

// GELU's exact form over n contiguous floats (kernels/gelu.cpp): out =
// gelu(x), and with it slope = gelu'(x) for the backward, by
// core/ops/gelu.h's loops compiled for AVX2 and AVX-512 too and split
// between threads: the same bits.
void gelu_erf(const float* x, float* out, int64_t n);
void gelu_erf_with_slope(const float* x, float* out, float* slope, int64_t n);

// AdamW's update of every parameter of a step (kernels/adamw.cpp): each
// slice's n elements of param, exp_avg and exp_avg_sq updated in place from
// its grad by core/ops/adamw.h's loop, compiled for AVX2 too, the elements
// of all slices split between threads in one parallel loop: the same bits.
// The slices' arrays must not overlap one another's.
template <typename T>
void adamw_update_all(const std::vector<AdamWSlice<T>>& slices);
int64_t adamw_update_all_runs(); // how many times it has run (for the tests)

// clip_grad_norm_'s 2-norm (kernels/sum_of_squares.cpp): for each
// defined, contiguous float or double gradient g, total[i] = the sum of
// double(g[j])^2 in the order sum() adds g's elements, as sum_of_squares in
// nn/optim.cpp computes it: the same bits, eight of sum()'s chunks (from
// any of the gradients of one dtype) side by side, the groups shared between
// threads. Other entries are left alone.
void sums_of_squares(const std::vector<Tensor>& grads, std::vector<double>& total);

// Storage's buffers (kernels/buffer_cache.cpp): a cache that keeps released
// buffers and hands each to the next request of its size class, instead of
// the definition's allocation and release at every request. Unlike the
// other kernels it is chosen when the fast kernels are built, not by the
// switch: a buffer goes back where it came from. take_buffer gives a
// 64-byte-aligned buffer of at least nbytes, or null when the system has
// none; buffer_stats is what memory_stats() reports, release_kept_buffers
// what empty_cache() does, reset_buffer_peak what reset_peak_memory_stats()
// does (core/tensor/storage.h).
void* take_buffer(size_t nbytes);
void give_back_buffer(void* data, size_t nbytes);
MemoryStats buffer_stats();
void release_kept_buffers();
void reset_buffer_peak();

} // namespace fast

} // namespace ember::internal
