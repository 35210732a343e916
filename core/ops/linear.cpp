// linear: PyTorch's F.linear, y = x @ W^T + b, as one op.
//
// What matmul(x, weight.t()) + bias computes, with the same bits, but as one
// node instead of five (the transpose, the fold of x's leading dims, the
// product, the unfold, the add) and without the intermediate product: the
// bias is added where the product lies. Its backward writes dW in W's own
// (out, in) layout, so the optimiser's gradient needs no transposing copy.
// nn::Linear (nn/linear.h) runs it. Tests: tests/test_matmul.cpp.
#include "core/autograd/autograd.h"
#include "core/kernels/dispatch.h"
#include "core/loops/map.h"
#include "core/ops/matmul.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::contiguous_data;
using internal::data_of;
using internal::empty_for;
using internal::gemm;
using internal::MatrixRef;

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
        fail<ShapeError>(name,
                         "needs an input of shape (..., in_features) and a weight of shape (out_features, "
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
    Tensor y = empty_for(name, y_shape, x.dtype());
    dispatch_floating(x.dtype(), name, [&]<typename T>(TypeTag<T>) {
        T* py = y.data_ptr<T>();
        gemm(MatrixRef<const T>{data_of<T>(xc), rows, in, in, 1},
             MatrixRef<const T>{data_of<T>(weight), in, out, weight.stride(1), weight.stride(0)},
             MatrixRef<T>{py, rows, out, out, 1}, false);
        if (!bc.defined()) return;
        const T* pb = data_of<T>(bc);
        parallel_for(0, rows, grain_for(out), [&](int64_t r0, int64_t r1) {
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
               [xs = SavedTensor(need_w ? xc : Tensor()), ws = SavedTensor(need_x ? weight : Tensor()), need_x, need_w,
                need_b, rows, in, out, x_shape = x.shape()](const Tensor& dout) -> Grads {
                   Tensor g = contiguous_data(dout);
                   Tensor dx = need_x ? empty_for("linear", x_shape, g.dtype()) : Tensor();
                   Tensor dw = need_w ? empty_for("linear", {out, in}, g.dtype()) : Tensor();
                   dispatch_floating(g.dtype(), "linear", [&]<typename T>(TypeTag<T>) {
                       const T* pg = data_of<T>(g);
                       if constexpr (internal::kFastKernelsBuilt && std::is_same_v<T, float>) {
                           if (need_x && need_w && internal::use_fast_kernels()) { // the same two products
                               const Tensor& w = ws.get();
                               internal::fast::linear_gradients({pg, rows, out, out, 1},
                                                                {data_of<T>(w), out, in, w.stride(0), w.stride(1)},
                                                                {data_of<T>(xs.get()), rows, in, in, 1},
                                                                {dx.data_ptr<T>(), rows, in, in, 1},
                                                                {dw.data_ptr<T>(), out, in, in, 1});
                               return;
                           }
                       }
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
