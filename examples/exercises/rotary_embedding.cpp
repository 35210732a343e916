// Exercise: implement a rotary embedding (docs/exercises.md; the idea and
// the PyTorch lines are in docs/rotary.md). RoPE turns each pair of a
// head's channels (i, i + hs/2) by the angle t * theta_i at position t,
// theta_i = 10000^(-2i/hs). A turned query at position m and a turned key
// at position n have a dot product that depends only on n - m, and a turn
// keeps every vector's length. Both are checked below from the math; the
// values themselves match the same lines run in PyTorch
// (tests/fixtures/fx_exercises.py).
//
//   build/examples/exercises/rotary_embedding
#include "exercise.h"

using namespace ember;

// x (..., T, hs) -> (..., T, hs), position t turned by t * theta.
Tensor rope(const Tensor& x, double base = 10000.0) {
    const int64_t T = x.size(-2), hs = x.size(-1);
    Tensor inv_freq = 1.0 / pow(base, arange(0, hs, 2).to(kFloat32) / double(hs)); // (hs/2,): theta_i
    Tensor angles = outer(arange(T).to(kFloat32), inv_freq);                       // (T, hs/2): t * theta_i
    angles = cat({angles, angles}, -1);                                            // (T, hs): pair i with i + hs/2
    Tensor x1 = x.slice(-1, 0, hs / 2), x2 = x.slice(-1, hs / 2);
    Tensor rotated = cat({-x2, x1}, -1); // (x1, x2) -> (-x2, x1): a quarter turn of each pair
    return x * cos(angles) + rotated * sin(angles);
}

int main() {
    const int64_t T = 6, hs = 8;
    manual_seed(0);
    Tensor x = randn({1, 2, T, hs}); // (B,NH,T,hs)
    Tensor y = rope(x);
    print_values("rope(x) for x = randn(1, 2, 6, 8) after manual_seed(0)", y);

    // A turn keeps lengths: |rope(x)| = |x| for every (B,NH,T) row.
    Tensor length_change = abs(sqrt(sum(y * y, -1)) - sqrt(sum(x * x, -1)));
    print_value("largest change of a row's length", max(length_change).item());

    // One query and one key, the same at every position: the scores (T,T)
    // then depend only on the distance n - m, so each diagonal is constant.
    Tensor q = randn({hs}).expand({T, hs}), k = randn({hs}).expand({T, hs});
    Tensor scores = matmul(rope(q), rope(k).t()); // (T,T)
    double spread = 0;
    for (int64_t d = -(T - 1); d < T; ++d) { // the diagonal n - m = d
        std::vector<Tensor> diagonal;
        for (int64_t m = std::max<int64_t>(0, -d); m < T && m + d < T; ++m) diagonal.push_back(scores[m][m + d]);
        Tensor values = stack(diagonal);
        spread = std::max(spread, (max(values) - min(values)).item());
    }
    print_value("largest spread along a diagonal of the scores", spread);
    // Without the rotation, equal vectors give equal scores everywhere; with
    // it, they change with the distance.
    print_values("scores[0], the query at 0 against keys at 0..5", scores[0]);
    return 0;
}
