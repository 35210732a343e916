// matmul with PyTorch's semantics, on top of the gemm kernels.
//
//   (K) @ (K)              -> ()          dot product
//   (M,K) @ (K,N)          -> (M,N)
//   (K) @ (...,K,N)        -> (...,N)     a is treated as (1,K), then squeezed
//   (...,M,K) @ (K)        -> (...,M)     b is treated as (K,1), then squeezed
//   (B...,M,K) @ (B'...,K,N) -> (broadcast(B, B')...,M,N)
// The 1-D cases, and the folding of (B...,M,K) @ (K,N) into one 2-D product,
// are views around the batched product, so only that product needs a
// backward of its own. Operands are read where they lie, whatever
// their strides. Tests: tests/test_matmul.cpp.
#include "autograd.h"
#include "gemm.h"
#include "loops.h"
#include "ops.h"
#include "shape.h"

namespace ember {

using namespace internal;

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
    Tensor out = empty(out_shape, a.dtype());

    // Where each batch's matrices start: the batch index decomposed over the
    // broadcast batch dims, times each operand's strides (0 where broadcast).
    Shape a_full = batch, b_full = batch;
    a_full.insert(a_full.end(), {m, k});
    b_full.insert(b_full.end(), {k, n});
    Shape sa = broadcast_strides(a, a_full), sb = broadcast_strides(b, b_full);
    const int64_t nbatch = shape_numel(batch);
    const int64_t nb = static_cast<int64_t>(batch.size());

    dispatch_floating(a.dtype(), "matmul", [&]<typename T>(TypeTag<T>) {
        const T* pa = data_of<T>(a);
        const T* pb = data_of<T>(b);
        T* pc = out.data_ptr<T>();
        // Slices [first, last): the first one's offsets from its index
        // decomposed over the batch dims, then each next one by an odometer
        // step (no division per slice).
        auto slices = [&](int64_t first, int64_t last) {
            Shape coord(nb);
            int64_t oa = 0, ob = 0;
            for (int64_t d = nb - 1, rest = first; d >= 0; --d) {
                coord[d] = rest % batch[d];
                rest /= batch[d];
                oa += coord[d] * sa[d];
                ob += coord[d] * sb[d];
            }
            for (int64_t i = first; i < last; ++i) {
                gemm(MatrixRef<const T>{pa + oa, m, k, sa[nb], sa[nb + 1]},
                     MatrixRef<const T>{pb + ob, k, n, sb[nb], sb[nb + 1]}, MatrixRef<T>{pc + i * m * n, m, n, n, 1},
                     false);
                for (int64_t d = nb - 1; d >= 0; --d) {
                    oa += sa[d], ob += sb[d];
                    if (++coord[d] < batch[d]) break;
                    oa -= sa[d] * batch[d], ob -= sb[d] * batch[d];
                    coord[d] = 0;
                }
            }
        };
        // Many small products, or enough mid-sized ones to keep every thread
        // equally busy (attention's, at the lecture size 384 slices of
        // 256 x 64 x 256): each thread takes whole slices, and gemm runs
        // serially inside, with no barrier or shared packing per slice. A few
        // large products: gemm splits each one's rows instead.
        const int64_t work = m * n * k;
        const bool by_slice = nbatch > 1 && (work < kGemmParallelWork ||
                                             (nbatch >= 8 * get_num_threads() && work <= 64 * kGemmParallelWork));
        if (by_slice) {
            int64_t grain = std::max<int64_t>(1, kGemmParallelWork / std::max<int64_t>(work, 1));
            parallel_for(0, nbatch, grain, slices);
        } else {
            slices(0, nbatch);
        }
    });

    // forward: out = a @ b, so da = dout @ b^T and db = a^T @ dout, each
    // summed over the batch dims it was broadcast along.
    if (needs_grad(a, b)) {
        bool need_a = a.requires_grad(), need_b = b.requires_grad();
        attach(out, "MmBackward0", {a, b},
               [sa_shape = a.shape(), sb_shape = b.shape(), a_saved = SavedTensor(need_b ? a : Tensor()),
                b_saved = SavedTensor(need_a ? b : Tensor())](const Tensor& dout) -> Grads {
                   Tensor da, db;
                   if (b_saved.get().defined()) da = sum_to(batched_matmul(dout, b_saved.get().transpose(-2, -1)), sa_shape);
                   if (a_saved.get().defined()) db = sum_to(batched_matmul(a_saved.get().transpose(-2, -1), dout), sb_shape);
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

// ---- linear: x @ W^T + b as one op -------------------------------------------------------
//
// What matmul(x, weight.t()) + bias computes, with the same bits, but as one
// node instead of five (the transpose, the fold of x's leading dims, the
// product, the unfold, the add) and without the intermediate product: the
// bias is added where the product lies. Its backward writes dW in W's own
// (out, in) layout, so the optimiser's gradient needs no transposing copy.
namespace {

// The node PyTorch 1.13's F.linear ends in, so that a printed result shows
// the notebook's grad_fn=<...>: addmm for a matrix input; addmm and a view
// for a contiguous 3-D one; else the matmul (with its view or squeeze) and
// the add it is made of.
const char* linear_node_name(const Tensor& x, bool has_bias) {
    if (x.dim() == 2) return has_bias ? "AddmmBackward0" : "MmBackward0";
    if (has_bias) return x.dim() == 3 && x.is_contiguous() ? "ViewBackward0" : "AddBackward0";
    return x.dim() == 1 ? "SqueezeBackward3" : "UnsafeViewBackward0";
}

} // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    const char* name = "linear";
    if (weight.dim() != 2 || x.dim() == 0 || x.size(-1) != weight.size(1))
        fail<ShapeError>(name, "needs an input of shape (..., in_features) and a weight of shape (out_features, "
                               "in_features), got input ",
                         x.shape(), " and weight ", weight.shape());
    if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0)))
        fail<ShapeError>(name, "bias must have shape (out_features,) = (", weight.size(0), "), got ", bias.shape(),
                         " (weight ", weight.shape(), ")");
    if (!x.is_floating_point() || weight.dtype() != x.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
        fail<DTypeError>(name, "needs one floating dtype, got input ", dtype_name(x.dtype()), " ", x.shape(),
                         ", weight ", dtype_name(weight.dtype()), (bias.defined() ? ", bias " : ""),
                         (bias.defined() ? dtype_name(bias.dtype()) : ""));
    const int64_t in = weight.size(1), out = weight.size(0);
    Shape y_shape(x.shape().begin(), x.shape().end() - 1);
    const int64_t rows = shape_numel(y_shape); // x's leading dims, folded into rows
    y_shape.push_back(out);

    // forward: y (rows, out) = x (rows, in) @ W^T, W^T read in place through
    // its strides; then each row += b.
    Tensor xc = contiguous_data(x);
    Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
    Tensor y = empty(y_shape, x.dtype());
    dispatch_floating(x.dtype(), name, [&]<typename T>(TypeTag<T>) {
        T* py = y.data_ptr<T>();
        gemm(MatrixRef<const T>{data_of<T>(xc), rows, in, in, 1},
             MatrixRef<const T>{data_of<T>(weight), in, out, weight.stride(1), weight.stride(0)},
             MatrixRef<T>{py, rows, out, out, 1}, false);
        if (!bc.defined()) return;
        const T* pb = data_of<T>(bc);
        parallel_for(0, rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(out, 1)),
                     [&](int64_t r0, int64_t r1) {
                         for (int64_t r = r0; r < r1; ++r)
                             for (int64_t j = 0; j < out; ++j) py[r * out + j] += pb[j];
                     });
    });

    // backward, with G = dy as (rows, out): dx = G @ W, dW = G^T @ x, and db
    // sums G's rows (as the add's backward, sum_to, does).
    if (needs_grad(x, weight, bias)) {
        const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
        const bool need_b = bias.defined() && bias.requires_grad();
        attach(y, linear_node_name(x, bias.defined()), {x, weight, bias},
               [xs = SavedTensor(need_w ? xc : Tensor()), ws = SavedTensor(need_x ? weight : Tensor()), need_x,
                need_w, need_b, rows, in, out, x_shape = x.shape()](const Tensor& dout) -> Grads {
                   Tensor g = contiguous_data(dout);
                   Tensor dx = need_x ? empty(x_shape, g.dtype()) : Tensor();
                   Tensor dw = need_w ? empty({out, in}, g.dtype()) : Tensor();
                   dispatch_floating(g.dtype(), "linear", [&]<typename T>(TypeTag<T>) {
                       const T* pg = data_of<T>(g);
                       if (need_x) {
                           const Tensor& w = ws.get();
                           gemm(MatrixRef<const T>{pg, rows, out, out, 1},
                                MatrixRef<const T>{data_of<T>(w), out, in, w.stride(0), w.stride(1)},
                                MatrixRef<T>{dx.data_ptr<T>(), rows, in, in, 1}, false);
                       }
                       if (need_w)
                           gemm(MatrixRef<const T>{pg, out, rows, 1, out},
                                MatrixRef<const T>{data_of<T>(xs.get()), rows, in, in, 1},
                                MatrixRef<T>{dw.data_ptr<T>(), out, in, in, 1}, false);
                   });
                   Tensor db = need_b ? sum_to(g, {out}) : Tensor();
                   return {dx, dw, db};
               });
    }
    return y;
}

} // namespace ember
