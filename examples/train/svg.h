// The pictures train_gpt draws, as SVG written by ember itself with only
// the C++ standard library: a loss curve (the loss of every training step, the
// train and val loss at eval steps, an optional dashed reference line such as
// ln(vocab), the loss of a uniform guess), an attention map (one heatmap per
// layer and head, labelled with the prompt's characters), and a chart of
// named lines (--diagnostics).
// Not a plotting library: linear axes, three fixed layouts, no embedded fonts
// (viewers use DejaVu Sans or their sans-serif). Tests: tests/test_svg.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace train {

// The losses measured at one eval step (each the mean over a few batches).
struct EvalPoint {
    int64_t step;
    double train_loss;
    double val_loss;
};

// The loss curve as SVG text. step_losses[i] is the loss of step i; evals may
// come in any order. Points that are NaN or infinite (or beyond +-1e300) are
// left out and the line joins their neighbours; with no drawable point at all
// the axes are drawn empty with a note. A reference that is not finite is
// left out too. Nothing here is invalid input, so nothing throws.
std::string loss_curve_svg(const std::vector<double>& step_losses, const std::vector<EvalPoint>& evals,
                           const std::string& title, std::optional<double> reference_loss = std::nullopt,
                           const std::string& reference_label = "");

// Writes loss_curve_svg(...) to `path` (through a new temporary file beside
// it and a rename, so an old picture is replaced whole or not at all). Throws std::runtime_error
// naming the path if the file cannot be written.
void write_loss_curve_svg(const std::string& path, const std::vector<double>& step_losses,
                          const std::vector<EvalPoint>& evals, const std::string& title,
                          std::optional<double> reference_loss = std::nullopt, const std::string& reference_label = "");

// The attention map as SVG text. T = prompt.size() (one position per byte);
// maps[layer][head] is a T x T row-major matrix of weights, row = query
// position, column = key position. Weights are drawn white (0) to dark blue (1);
// values outside [0,1] are clamped, NaN cells are drawn red. Throws
// std::invalid_argument if T == 0, maps is empty, a layer has no heads, layers
// have different numbers of heads, or a matrix does not have T*T weights.
std::string attention_svg(const std::string& prompt, const std::vector<std::vector<std::vector<float>>>& maps,
                          const std::string& title);
// The same for a prompt of BPE tokens, T = tokens.size(), each labelled with
// its text (at most 12 characters shown; keys' labels then read upwards).
std::string attention_svg(const std::vector<std::string>& tokens,
                          const std::vector<std::vector<std::vector<float>>>& maps, const std::string& title);

// Writes attention_svg(...) to `path`, as write_loss_curve_svg does.
void write_attention_svg(const std::string& path, const std::string& prompt,
                         const std::vector<std::vector<std::vector<float>>>& maps, const std::string& title);
void write_attention_svg(const std::string& path, const std::vector<std::string>& tokens,
                         const std::vector<std::vector<std::vector<float>>>& maps, const std::string& title);

// One named line of a line chart: points (x[i], y[i]); dashed if asked.
struct Series {
    std::string label;
    std::vector<double> x, y;
    bool dashed = false;
};

// A chart of several lines (train_gpt --diagnostics draws its histograms and
// its update ratios with it): a title and a subtitle, the lines in
// matplotlib's ten colours (dashed from the eleventh on), a legend in a
// column at the right, and an optional dashed horizontal reference line.
// Points that are not finite are left out; with none at all the axes are
// drawn empty with a note. Nothing here throws.
std::string lines_svg(const std::string& title, const std::string& subtitle, const std::string& x_label,
                      const std::string& y_label, const std::vector<Series>& series,
                      std::optional<double> reference_y = std::nullopt, const std::string& reference_label = "");

// Writes lines_svg(...) to `path`, as write_loss_curve_svg does.
void write_lines_svg(const std::string& path, const std::string& title, const std::string& subtitle,
                     const std::string& x_label, const std::string& y_label, const std::vector<Series>& series,
                     std::optional<double> reference_y = std::nullopt, const std::string& reference_label = "");

} // namespace train
