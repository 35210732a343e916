// Joining and picking: cat, stack, tril, triu, index_select, repeat_interleave,
// embedding.
//
// cat copies each input into its slice of the result, and its backward hands
// each input its slice of dout back. index_select gathers entries along a dim;
// its backward scatters dout back with additions (an index may repeat), one
// thread per range of columns so no two threads add into one element.
// embedding picks rows the same way. (chunk and split are views: core/tensor/view.cpp.)
// Tests: tests/test_index.cpp.
#include "core/autograd/autograd.h"
#include "core/loops/map.h"
#include "core/ops/ops.h"
#include "core/tensor/shape.h"

namespace ember {

using internal::contiguous_data;
using internal::copy_elements;
using internal::DimSplit;
using internal::empty_for;
using internal::make_view;
using internal::split_at;

// ---- cat, stack -----------------------------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
    if (tensors.empty()) fail<ValueError>("cat", "expects a non-empty list of tensors");
    // PyTorch skips 1-D empty tensors (shape (0)) when joining others.
    std::vector<Tensor> parts;
    for (const Tensor& t : tensors)
        if (!(t.dim() == 1 && t.numel() == 0)) parts.push_back(t);
    if (parts.empty()) return empty_for("cat", {0}, tensors[0].dtype());
    const Tensor& first = parts[0];
    if (first.dim() == 0) fail<ShapeError>("cat", "zero-dimensional tensor (shape ()) cannot be concatenated");
    int64_t d = wrap_dim(dim, first.dim(), "cat");
    Shape out_shape = first.shape();
    out_shape[d] = 0;
    DType dtype = first.dtype();
    for (size_t i = 0; i < parts.size(); ++i) {
        const Tensor& t = parts[i];
        bool same = t.dim() == first.dim();
        for (int64_t k = 0; same && k < t.dim(); ++k) same = k == d || t.shape()[k] == first.shape()[k];
        if (!same)
            fail<ShapeError>("cat", "tensor ", i, " has shape ", t.shape(), " but tensor 0 has shape ", first.shape(),
                             "; all sizes must match except in dimension ", dim);
        if (t.shape()[d] > kMaxNumel - out_shape[d]) // expanded views can be that large; the sum must not overflow
            fail<ValueError>("cat", "the result would have more than ", kMaxNumel, " elements along dimension ", dim);
        out_shape[d] += t.shape()[d];
        dtype = promote_types(dtype, t.dtype());
    }
    Tensor out = empty_for("cat", out_shape, dtype);
    Shape sizes;
    int64_t offset = 0;
    for (const Tensor& t : parts) {
        Tensor slot = make_view(out, t.shape(), out.strides(), out.storage_offset() + offset * out.strides()[d]);
        copy_elements(slot, t);
        offset += t.shape()[d];
        sizes.push_back(t.shape()[d]);
    }
    // forward: out = [t0; t1; ...] along d, so input i gets its slice of dout.
    if (needs_grad(parts))
        attach(out, "CatBackward0", parts, [sizes, d](const Tensor& dout) -> Grads { return dout.split(sizes, d); });
    return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
    if (tensors.empty()) fail<ValueError>("stack", "expects a non-empty list of tensors");
    int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
    std::vector<Tensor> expanded;
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].shape() != tensors[0].shape())
            fail<ShapeError>("stack", "tensor ", i, " has shape ", tensors[i].shape(), " but tensor 0 has shape ",
                             tensors[0].shape(), "; stack needs equal shapes");
        expanded.push_back(tensors[i].unsqueeze(d));
    }
    return cat(expanded, d);
}

// ---- tril, triu -----------------------------------------------------------------------------------

namespace {

// Keeps element (i, j) of each matrix (last two dims) where keep(j - i), else 0.
template <typename Keep>
Tensor triangle(const Tensor& x_in, const char* op, Keep keep) {
    if (x_in.dim() < 2) fail<ShapeError>(op, "needs a tensor with at least 2 dimensions, got ", x_in.shape());
    Tensor x = contiguous_data(x_in);
    Tensor out = empty_for(op, x.shape(), x.dtype());
    const int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
    const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
    dispatch(x.dtype(), [&]<typename T>(TypeTag<T>) {
        const T* px = x.data_ptr<T>();
        T* po = out.data_ptr<T>();
        parallel_for(0, matrices * rows, grain_for(cols), [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                int64_t i = r % rows;
                for (int64_t j = 0; j < cols; ++j) po[r * cols + j] = keep(j - i) ? px[r * cols + j] : T(0);
            }
        });
    });
    return out;
}

} // namespace

Tensor tril(const Tensor& x, int64_t diagonal) {
    Tensor out = triangle(x, "tril", [diagonal](int64_t j_minus_i) { return j_minus_i <= diagonal; });
    // forward: out = x on and below the diagonal, 0 above, so dx = tril(dout).
    if (needs_grad(x))
        attach(out, "TrilBackward0", {x}, [diagonal](const Tensor& dout) -> Grads { return {tril(dout, diagonal)}; });
    return out;
}

Tensor triu(const Tensor& x, int64_t diagonal) {
    Tensor out = triangle(x, "triu", [diagonal](int64_t j_minus_i) { return j_minus_i >= diagonal; });
    // forward: out = x on and above the diagonal, 0 below, so dx = triu(dout).
    if (needs_grad(x))
        attach(out, "TriuBackward0", {x}, [diagonal](const Tensor& dout) -> Grads { return {triu(dout, diagonal)}; });
    return out;
}

// ---- index_select, embedding ------------------------------------------------------------------------

namespace {

// Checks every index is in [0, size); returns them contiguous.
Tensor checked_indices(const Tensor& index, int64_t size, const char* op, const Tensor& x, int64_t dim) {
    Tensor idx = contiguous_data(index);
    const int64_t* p = idx.data_ptr<int64_t>();
    for (int64_t i = 0; i < idx.numel(); ++i)
        if (p[i] < 0 || p[i] >= size)
            fail<IndexError>(op, "index ", p[i], " is out of range for dimension ", dim, " of size ", size, " (shape ",
                             x.shape(), ")");
    return idx;
}

// dx (contiguous, zeroed, of x's shape) gets dout's entry i added at index[i] along dim.
Tensor index_add_backward(const char* op, const Tensor& dout, const Tensor& idx, int64_t dim, const Shape& in_shape) {
    Tensor dx = empty_for(op, in_shape, dout.dtype());
    dx.zero_();
    Tensor g = contiguous_data(dout);
    DimSplit sx = split_at(in_shape, dim);
    DimSplit sg = split_at(g.shape(), dim);
    const int64_t* p = idx.data_ptr<int64_t>();
    dispatch_floating(dx.dtype(), "index_select", [&]<typename T>(TypeTag<T>) {
        T* px = dx.data_ptr<T>();
        const T* pg = g.data_ptr<T>();
        // Threads own disjoint ranges of the `inner` columns; each element
        // receives its additions in the order of i, whatever the thread count.
        parallel_for(0, sx.inner, grain_for(sg.outer * sg.size), [&](int64_t b, int64_t e) {
            for (int64_t o = 0; o < sg.outer; ++o)
                for (int64_t i = 0; i < sg.size; ++i) {
                    T* dst = px + (o * sx.size + p[i]) * sx.inner;
                    const T* src = pg + (o * sg.size + i) * sg.inner;
                    for (int64_t j = b; j < e; ++j) dst[j] += src[j];
                }
        });
    });
    return dx;
}


// out[o, i, :] = x[o, index[i], :] around dim d (no autograd).
Tensor gather_rows(const char* op, const Tensor& x, int64_t d, const Tensor& idx) {
    Tensor src = contiguous_data(x);
    Shape out_shape = x.shape();
    out_shape[d] = idx.numel();
    Tensor out = empty_for(op, out_shape, x.dtype());
    DimSplit sx = split_at(src.shape(), d);
    const int64_t* p = idx.data_ptr<int64_t>();
    const int64_t n = idx.numel();
    dispatch(x.dtype(), [&]<typename T>(TypeTag<T>) {
        const T* px = src.data_ptr<T>();
        T* po = out.data_ptr<T>();
        parallel_for(0, sx.outer * n, grain_for(sx.inner), [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                int64_t o = r / n, i = r % n;
                const T* from = px + (o * sx.size + p[i]) * sx.inner;
                std::copy(from, from + sx.inner, po + r * sx.inner);
            }
        });
    });
    return out;
}

} // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
    if (index.dtype() != kInt64)
        fail<DTypeError>("index_select", "index must be int64, got ", dtype_name(index.dtype()), " ", index.shape());
    if (index.dim() > 1)
        fail<ShapeError>("index_select", "index must be 1-D, got shape ", index.shape(), " (input ", x.shape(), ")");
    if (x.dim() == 0) fail<IndexError>("index_select", "cannot index a 0-dimensional tensor");
    int64_t d = wrap_dim(dim, x.dim(), "index_select");
    Tensor idx = checked_indices(index, x.shape()[d], "index_select", x, dim);
    Tensor out = gather_rows("index_select", x, d, idx);
    // forward: out[.., i, ..] = x[.., index[i], ..], so dx[.., index[i], ..] += dout[.., i, ..].
    if (needs_grad(x))
        attach(out, "IndexSelectBackward0", {x, index},
               [is = SavedTensor(idx), d, in = x.shape()](const Tensor& dout) -> Grads {
                   return {index_add_backward("index_select", dout, is.get(), d, in), Tensor()};
               });
    return out;
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
    if (repeats < 0)
        fail<ValueError>("repeat_interleave", "repeats must be non-negative, got ", repeats, " (input ", x.shape(),
                         ")");
    if (!dim) return repeat_interleave(x.reshape({-1}), repeats, 0); // no dim: over the flattened input
    if (x.dim() == 0) fail<IndexError>("repeat_interleave", "cannot repeat along dim ", *dim, " of a 0-d tensor");
    int64_t d = wrap_dim(*dim, x.dim(), "repeat_interleave");
    // The output's size along d, x.size(d) * repeats, must not overflow (a
    // wrapped product gave repeats 2^62 + 1 the input's own shape).
    Shape out_shape = x.shape();
    if (repeats > 0 && x.size(d) > kMaxNumel / repeats)
        fail<ValueError>("repeat_interleave", "repeats ", repeats, " of ", x.size(d), " entries along dim ", d,
                         " are too many elements (input ", x.shape(), ")");
    out_shape[static_cast<size_t>(d)] = x.size(d) * repeats;
    check_sizes(out_shape, "repeat_interleave");
    // Each entry along d, `repeats` times in a row: index_select with the
    // index [0, 0, 1, 1, 2, 2] (repeats 2), whose entry i is i / repeats.
    // PyTorch does the same, so the node is IndexSelectBackward0.
    Tensor index = empty({x.size(d) * repeats}, kInt64);
    int64_t* p = index.data_ptr<int64_t>();
    for (int64_t i = 0; i < index.numel(); ++i) p[i] = i / repeats;
    return index_select(x, d, index);
}

Tensor embedding(const Tensor& input, const Tensor& weight) {
    if (weight.dim() != 2)
        fail<ShapeError>("embedding", "weight must be 2-D (num_embeddings, embedding_dim), got ", weight.shape());
    if (input.dtype() != kInt64)
        fail<DTypeError>("embedding", "input must hold int64 indices, got ", dtype_name(input.dtype()), " ",
                         input.shape(), " (weight ", weight.shape(), ")");
    Tensor idx = checked_indices(input.reshape({-1}), weight.shape()[0], "embedding", weight, 0);
    // input (any shape) picks rows of weight (V,C): out is (*input.shape, C).
    Shape out_shape = input.shape();
    out_shape.push_back(weight.shape()[1]);
    Tensor out = gather_rows("embedding", weight, 0, idx).view(out_shape);
    // forward: out[n] = weight[input[n]], so dweight[input[n]] += dout[n]
    // (a row picked twice gets both gradients).
    if (needs_grad(weight))
        attach(out, "EmbeddingBackward0", {weight, input},
               [is = SavedTensor(idx), in = weight.shape()](const Tensor& dout) -> Grads {
                   // dout (*input.shape, C) -> (N,C), N = input.numel(); the rows
                   // are spelled out, as -1 cannot be inferred when C is 0.
                   Tensor rows = dout.reshape({is.get().numel(), in[1]});
                   return {index_add_backward("embedding", rows, is.get(), 0, in), Tensor()};
               });
    return out;
}

} // namespace ember
