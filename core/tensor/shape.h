// Shape arithmetic shared by every op: element counts, contiguous strides,
// negative dims, and PyTorch's broadcasting rule.
//
// Broadcasting lines two shapes up from the right; each pair of sizes must be
// equal or contain a 1, and the result takes the larger. (3,1,5) and (4,5)
// broadcast to (3,4,5). docs/tensor.md explains it with pictures.
// Tests: tests/test_views.cpp, tests/test_binary.cpp (broadcasting), tests/test_errors.cpp.
#pragma once

#include <string>

#include "core/tensor/error.h"

namespace ember {

// Product of the sizes: the number of elements (1 for a scalar's shape ()).
int64_t shape_numel(const Shape& shape);

// Row-major strides: (2,3,4) -> (12,4,1).
Shape contiguous_strides(const Shape& shape);

// Maps a possibly negative dim into [0, ndim); -1 is the last dimension.
// An out-of-range dim is an IndexError naming `op`. For an op that inserts a
// dimension (unsqueeze, stack) pass ndim + 1.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// The shape two shapes broadcast to, or a ShapeError naming `op` and both.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// The most elements a tensor may have (about 2^60): its byte count (8 bytes
// at most per element) still fits in an int64.
inline constexpr int64_t kMaxNumel = INT64_MAX / 8;

// Validates sizes given to a factory or a view: each must be >= 0, and the
// element count (the product of the non-zero sizes) at most kMaxNumel.
void check_sizes(const Shape& shape, const char* op);

} // namespace ember
