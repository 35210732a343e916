// matmul with PyTorch's semantics (the cases below), on top of the 2-D
// product gemm (matmul.h), whose definition, a plain loop, opens this file.
// The 1-D cases, and the folding of (B...,M,K) @ (K,N) into one 2-D
// product, are views around the batched product, so only that product
// needs a backward of its own. Operands are read where they lie, whatever
// their strides. docs/matmul.md; tests: tests/test_matmul.cpp.
#include "core/ops/matmul.h"

#include <vector>

#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/loops/iter.h"
#include "core/loops/map.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

//   (K) @ (K)              -> ()          dot product
//   (M,K) @ (K,N)          -> (M,N)
//   (K) @ (...,K,N)        -> (...,N)     a is treated as (1,K), then squeezed
//   (...,M,K) @ (K)        -> (...,M)     b is treated as (K,1), then squeezed
//   (B...,M,K) @ (B'...,K,N) -> (broadcast(B, B')...,M,N)

namespace ember {

// ---- the 2-D product: c = a @ b ---------------------------------------------------------

namespace internal {

namespace {

// c_ij = (accumulate ? c_ij : 0) + sum_k a_ik b_kj, the sum taken in
// increasing k and rounded after every multiply and every add, in T. The
// loops run i-k-j: for each row i of C, a_ik times row k of B is added into
// the whole row at once, so the inner loop walks two contiguous rows (which
// the compiler vectorises) while each c_ij still receives its products in
// increasing k. Threads take whole rows of C.
template <typename T>
void plain(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, bool accumulate) {
    const int64_t m = c.rows, n = c.cols, k = a.cols;
    if (m == 0 || n == 0) return;
    // The inner loop wants B's rows contiguous: a B read through a column
    // stride (W^T, k^T) is copied row-major first, k*n values against the
    // m*n*k multiply-adds.
    std::vector<T> b_rows;
    if (b.col_stride != 1 && k > 0) {
        b_rows.resize(static_cast<size_t>(k * n));
        for (int64_t p = 0; p < k; ++p)
            for (int64_t j = 0; j < n; ++j) b_rows[p * n + j] = b.at(p, j);
        b = MatrixRef<const T>{b_rows.data(), k, n, n, 1};
    }
    parallel_for(0, m, grain_for(n * k, kGemmParallelWork), [&](int64_t begin, int64_t end) {
        std::vector<T> row(static_cast<size_t>(n)); // row i of C while it is summed
        for (int64_t i = begin; i < end; ++i) {
            for (int64_t j = 0; j < n; ++j) row[j] = accumulate ? c.at(i, j) : T(0);
            for (int64_t p = 0; p < k; ++p) {
                const T aip = a.at(i, p);
                const T* brow = &b.at(p, 0);
                for (int64_t j = 0; j < n; ++j) row[j] += aip * brow[j];
            }
            for (int64_t j = 0; j < n; ++j) c.at(i, j) = row[j];
        }
    });
}

// The definition, or the fast kernels when they are on (core/kernels/dispatch.h).
template <typename T>
void plain_or_fast(MatrixRef<const T> a, MatrixRef<const T> b, MatrixRef<T> c, bool accumulate) {
    if constexpr (kFastKernelsBuilt) {
        if (use_fast_kernels()) return fast::gemm(a, b, c, accumulate);
    }
    plain(a, b, c, accumulate);
}

} // namespace

void gemm_plain(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    plain(a, b, c, accumulate);
}
void gemm_plain(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate) {
    plain(a, b, c, accumulate);
}

void gemm(MatrixRef<const float> a, MatrixRef<const float> b, MatrixRef<float> c, bool accumulate) {
    plain_or_fast(a, b, c, accumulate);
}
void gemm(MatrixRef<const double> a, MatrixRef<const double> b, MatrixRef<double> c, bool accumulate) {
    plain_or_fast(a, b, c, accumulate);
}

} // namespace internal

// ---- matmul ------------------------------------------------------------------------------

using internal::broadcast_strides;
using internal::data_of;
using internal::empty_for;
using internal::for_each_gemm_slice;
using internal::gemm;
using internal::MatrixRef;
using internal::offset_of;

namespace {

// a (B...,M,K) @ b (B'...,K,N), both at least 2-D and of one floating dtype.
Tensor batched_matmul(const Tensor& a, const Tensor& b) {
    const int64_t m = a.shape()[a.dim() - 2], k = a.shape()[a.dim() - 1], n = b.shape()[b.dim() - 1];
    Shape a_batch(a.shape().begin(), a.shape().end() - 2);
    Shape b_batch(b.shape().begin(), b.shape().end() - 2);
    Shape batch = broadcast_shapes(a_batch, b_batch, "matmul");
    Shape out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    Tensor out = empty_for("matmul", out_shape, a.dtype());

    Shape a_full = batch, b_full = batch;
    a_full.insert(a_full.end(), {m, k});
    b_full.insert(b_full.end(), {k, n});
    Shape sa = broadcast_strides(a, a_full), sb = broadcast_strides(b, b_full);
    const int64_t nbatch = shape_numel(batch);
    const int64_t nb = static_cast<int64_t>(batch.size());

    // Slice i's matrices start at batch index i over the broadcast batch
    // dims, through each operand's batch strides (0 where broadcast).
    std::vector<int64_t> a_at(static_cast<size_t>(nbatch)), b_at(static_cast<size_t>(nbatch));
    for (int64_t i = 0; i < nbatch; ++i) {
        a_at[i] = offset_of(i, batch, std::span(sa).first(nb));
        b_at[i] = offset_of(i, batch, std::span(sb).first(nb));
    }
    dispatch_floating(a.dtype(), "matmul", [&]<typename T>(TypeTag<T>) {
        const T* pa = data_of<T>(a);
        const T* pb = data_of<T>(b);
        T* pc = out.data_ptr<T>();
        // out[i] (M,N) = a[i] (M,K) @ b[i] (K,N) for every slice i, each read
        // where it lies through its strides.
        for_each_gemm_slice(nbatch, m * n * k, [&](int64_t i) {
            gemm(MatrixRef<const T>{pa + a_at[i], m, k, sa[nb], sa[nb + 1]},
                 MatrixRef<const T>{pb + b_at[i], k, n, sb[nb], sb[nb + 1]}, MatrixRef<T>{pc + i * m * n, m, n, n, 1},
                 false);
        });
    });

    // forward: out = a @ b, so da = dout @ b^T and db = a^T @ dout, each
    // summed over the batch dims it was broadcast along.
    if (needs_grad(a, b)) {
        bool need_a = a.requires_grad(), need_b = b.requires_grad();
        attach(out, "MmBackward0", {a, b},
               [sa_shape = a.shape(), sb_shape = b.shape(), a_saved = SavedTensor(need_b ? a : Tensor()),
                b_saved = SavedTensor(need_a ? b : Tensor())](const Tensor& dout) -> Grads {
                   Tensor da, db;
                   if (b_saved.get().defined())
                       da = sum_to(batched_matmul(dout, b_saved.get().transpose(-2, -1)), sa_shape);
                   if (a_saved.get().defined())
                       db = sum_to(batched_matmul(a_saved.get().transpose(-2, -1), dout), sb_shape);
                   return {da, db};
               });
    }
    return out;
}

} // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
    if (a.dim() == 0 || b.dim() == 0)
        fail<ShapeError>("matmul", "both arguments need at least 1 dimension, got a ", a.shape(), " and b ", b.shape());
    if (a.dtype() != b.dtype())
        fail<DTypeError>("matmul", "dtypes differ: a is ", dtype_name(a.dtype()), " ", a.shape(), ", b is ",
                         dtype_name(b.dtype()), " ", b.shape());
    if (!a.is_floating_point())
        fail<DTypeError>("matmul", "supports float32 and float64, got ", dtype_name(a.dtype()), " for a ", a.shape(),
                         " and b ", b.shape());
    int64_t ka = a.shape().back();
    int64_t kb = b.dim() == 1 ? b.shape()[0] : b.shape()[b.dim() - 2];
    if (ka != kb) fail<ShapeError>("matmul", "inner dimensions differ: a is ", a.shape(), ", b is ", b.shape());
    // Batch dims (all but the last two) must broadcast, lined up from the right.
    for (int64_t i = 3; i <= std::min(a.dim(), b.dim()); ++i) {
        int64_t sa = a.shape()[a.dim() - i], sb = b.shape()[b.dim() - i];
        if (sa != sb && sa != 1 && sb != 1)
            fail<ShapeError>("matmul", "batch dimensions do not broadcast: a is ", a.shape(), ", b is ", b.shape());
    }

    if (a.dim() == 1 && b.dim() == 1) return batched_matmul(a.unsqueeze(0), b.unsqueeze(1)).view({});
    // (B...,M,K) @ (K,N), as a Linear layer on (B,T,C) does: fold the batch
    // into the rows, one (B*M,K) @ (K,N) product instead of B small ones, as
    // PyTorch does. The fold is a view when a's strides allow it.
    if (a.dim() > 2 && b.dim() == 2 && a.numel() > 0) {
        Shape out_shape(a.shape().begin(), a.shape().end() - 1);
        out_shape.push_back(b.shape()[1]);
        return batched_matmul(a.reshape({-1, ka}), b).view(out_shape);
    }
    if (a.dim() == 1) return batched_matmul(a.unsqueeze(0), b).squeeze(-2);
    if (b.dim() == 1) return batched_matmul(a, b.unsqueeze(1)).squeeze(-1);
    return batched_matmul(a, b);
}

} // namespace ember
