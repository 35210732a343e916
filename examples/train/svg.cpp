// The loss curve and the attention map of svg.h, written as SVG text by hand.
//
// Both pictures are built the same way: measure the data, lay out boxes in
// pixels, then append elements to one string. Every element a test looks for
// carries a class ("step-loss", "x-ticks", "heatmap", "cells", ...), and every
// piece of user text goes through xml_text, so the file is well-formed XML
// whatever the title or prompt holds. Numbers are formatted with std::to_chars,
// which ignores the C locale (a German locale must not write "1,5" into a
// coordinate). Tests: tests/test_svg.cpp.
#include "svg.h"

#include "core/tensor/svg_text.h"
#include "nn/tokenizer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

namespace train {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kMono = "DejaVu Sans Mono, Menlo, Consolas, monospace";

// The text helpers shared with ember's other pictures (core/tensor/svg_text.h).
using ember::internal::fixed;
using ember::internal::num;
using ember::internal::svg_open;
using ember::internal::svg_text;
using ember::internal::text_width;
using ember::internal::xml_text;

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs = "") {
    return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\"" +
           (attrs.empty() ? "" : " " + attrs) + "/>\n";
}

// Writes the picture whole or not at all; train's API promises std::runtime_error.
void write_atomically(const std::string& path, const std::string& svg, const std::string& op) {
    const std::string why = ember::internal::write_file_whole(path, svg);
    if (!why.empty()) throw std::runtime_error(op + "cannot write '" + path + "': " + why);
}

// ---- axes -------------------------------------------------------------------

struct Range {
    double lo = kInf, hi = -kInf;
    void include(double v) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    bool empty() const { return lo > hi; }
};

// Axis limits around the data. A span of zero (one point, a flat loss) is
// widened to +-10% of the value (+-1 at zero, at least +-min_half) so ticks
// have room; then `pad` of the span is added on each side, as matplotlib's
// margins do, so no point or end tick sits on the frame.
Range axis_limits(Range r, double pad, double min_half) {
    const double span = r.hi - r.lo;
    if (span <= 1e-9 * std::max(std::abs(r.lo), std::abs(r.hi)) || span == 0) {
        const double mid = r.lo / 2 + r.hi / 2;
        const double half = std::max(mid != 0 ? 0.1 * std::abs(mid) : 1.0, min_half);
        r = {mid - half, mid + half};
    }
    const double padding = pad * (r.hi - r.lo);
    return {r.lo - padding, r.hi + padding};
}

struct Ticks {
    double step = 1;
    std::vector<double> values;
    std::vector<std::string> labels;
};

// Ticks at the multiples of a "nice" step inside the limits: 1, 2 or 5 times
// a power of ten, the one closest to giving `target` intervals. For target 5
// that is 3 to 8 ticks, and none is more than a step from either end of the
// data. min_step keeps the step axis on whole steps. Labels share one number
// of decimals; with `si`, large values are written 20k, 1.5M, ... (step
// counts); without it, values beyond 1e9 or steps below 1e-8 use e-notation.
Ticks nice_ticks(Range r, int target, double min_step, bool si) {
    Ticks t;
    const double raw = (r.hi - r.lo) / target;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double norm = raw / mag; // in [1, 10)
    t.step = std::max(min_step, (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag);
    // Counting ticks by integer index: k * step stays exact for whole multiples,
    // and the loop is bounded even where k is too large to increment.
    const double k0 = std::ceil(r.lo / t.step - 1e-9), k1 = std::floor(r.hi / t.step + 1e-9);
    for (int i = 0; i <= std::min(k1 - k0, 50.0); ++i) t.values.push_back((k0 + i) * t.step + 0.0);

    const double max_abs = t.values.empty() ? 0 : std::max(std::abs(t.values.front()), std::abs(t.values.back()));
    double unit = 1;
    std::string suffix;
    if (si && max_abs >= 1e4) {
        static const std::array<std::pair<double, const char*>, 6> kUnits = {
            {{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}};
        for (const auto& [u, s] : kUnits) {
            if (max_abs >= u) {
                unit = u;
                suffix = s;
                break;
            }
        }
    }
    const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(t.step / unit) + 1e-9)));
    const bool sci = !si && (max_abs >= 1e9 || decimals > 8);
    const int digits =
        std::clamp(static_cast<int>(std::floor(std::log10(std::max(max_abs, t.step))) - std::floor(std::log10(t.step))),
                   0, 12);
    for (double v : t.values) {
        if (sci) {
            char buf[64];
            auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, digits);
            t.labels.emplace_back(buf, ec == std::errc{} ? end : buf);
        } else {
            t.labels.push_back(v == 0 && si ? "0" : fixed(v / unit, decimals) + suffix); // "0", not "0.0T"
        }
    }
    return t;
}

struct Point {
    double x, y;
};

// The per-step line in pixels, thinned for long runs: within each half-pixel
// column only the first, lowest, highest and last points are kept (the "M4"
// rule), which draws exactly the same line as all of them. 100k steps across
// 800 px become at most ~6k points instead of a 2 MB file.
std::vector<Point> thin_line(const std::vector<Point>& pts) {
    std::vector<Point> out;
    size_t i = 0;
    while (i < pts.size()) {
        const double column = std::floor(pts[i].x * 2);
        size_t j = i, lo = i, hi = i;
        for (; j < pts.size() && std::floor(pts[j].x * 2) == column; ++j) {
            if (pts[j].y < pts[lo].y) lo = j;
            if (pts[j].y > pts[hi].y) hi = j;
        }
        std::array<size_t, 4> keep = {i, lo, hi, j - 1};
        std::sort(keep.begin(), keep.end());
        for (size_t k = 0; k < keep.size(); ++k) {
            if (k == 0 || keep[k] != keep[k - 1]) out.push_back(pts[keep[k]]);
        }
        i = j;
    }
    return out;
}

std::string points_attr(const std::vector<Point>& pts) {
    std::string s;
    for (const Point& p : pts) {
        if (!s.empty()) s += ' ';
        s += num(p.x) + "," + num(p.y);
    }
    return s;
}

// The three series' colours: a light blue for the noisy per-step loss, so the
// eval lines (dark blue and orange, as matplotlib's tab10) read on top of it.
constexpr const char* kStepColour = "#9ecae1";
constexpr const char* kTrainColour = "#1f5fa8";
constexpr const char* kValColour = "#e6550d";

// A legend sample: a short line, with a marker for the eval series.
std::string legend_sample(double x, double y, const char* colour, double width, bool marker) {
    std::string s = line(x, y, x + 24, y, "stroke=\"" + std::string(colour) + "\" stroke-width=\"" + num(width) + "\"");
    if (marker) {
        s += "<circle cx=\"" + num(x + 12) + "\" cy=\"" + num(y) + "\" r=\"3.5\" fill=\"" + colour +
             "\" stroke=\"#ffffff\" stroke-width=\"1\"/>\n";
    }
    return s;
}

// ---- attention colours ------------------------------------------------------

// matplotlib's "Blues" (ColorBrewer) with its first stop moved from #f7fbff to
// pure white, so a weight of 0 is exactly the page and 1 is the darkest blue.
constexpr std::array<std::array<int, 3>, 9> kBlues = {{{255, 255, 255},
                                                       {222, 235, 247},
                                                       {198, 219, 239},
                                                       {158, 202, 225},
                                                       {107, 174, 214},
                                                       {66, 146, 198},
                                                       {33, 113, 181},
                                                       {8, 81, 156},
                                                       {8, 48, 107}}};

std::string hex(int r, int g, int b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
    return buf;
}

// The colour of weight w: linear between the two Blues stops around it.
std::string weight_colour(float w) {
    if (std::isnan(w)) return "#d62728";
    const double pos = std::clamp(static_cast<double>(w), 0.0, 1.0) * (kBlues.size() - 1);
    const size_t i = std::min(static_cast<size_t>(pos), kBlues.size() - 2);
    const double t = pos - static_cast<double>(i);
    std::array<int, 3> c{};
    for (size_t k = 0; k < 3; ++k) {
        c[k] = static_cast<int>(std::lround(kBlues[i][k] + t * (kBlues[i + 1][k] - kBlues[i][k])));
    }
    return hex(c[0], c[1], c[2]);
}

// How a token is shown as a label: whitespace as a visible sign, control
// bytes and bytes that make no UTF-8 character (a prompt's byte that is a
// piece of one, a token that cuts one) as U+FFFD, at most 12 characters
// (then an ellipsis). `sign` says the label stands only for something else;
// `length` is its number of characters.
std::string token_label(const std::string& token, bool& sign, size_t& length) {
    const std::string text = ember::tokenizer::utf8_replace_invalid(token);
    std::string out;
    sign = true;
    length = 0;
    for (size_t i = 0; i < text.size();) {
        const auto b = static_cast<unsigned char>(text[i]);
        const size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; // valid UTF-8 after the replacement
        const std::string c = text.substr(i, n);
        i += n;
        if (length == 12) {
            out += "\xE2\x80\xA6"; // … U+2026
            break;
        }
        ++length;
        if (c == " ") out += "\xE2\x90\xA3";       // ␣ U+2423 OPEN BOX
        else if (c == "\n") out += "\xE2\x8F\x8E"; // ⏎ U+23CE RETURN SYMBOL
        else if (c == "\t") out += "\xE2\x86\x92"; // → U+2192
        else if (n == 1 && (b < 0x20 || b == 0x7F)) out += "\xEF\xBF\xBD";
        else {
            out += c;
            sign = sign && c == "\xEF\xBF\xBD";
        }
    }
    return out;
}

} // namespace

// ---- the loss curve -----------------------------------------------------------

std::string loss_curve_svg(const std::vector<double>& step_losses, const std::vector<EvalPoint>& evals,
                           const std::string& title, std::optional<double> reference_loss,
                           const std::string& reference_label) {
    // The data: finite points only (beyond 1e300 a span would overflow).
    auto drawable = [](double v) { return std::isfinite(v) && std::abs(v) <= 1e300; };
    std::vector<Point> steps, train, val;
    for (size_t i = 0; i < step_losses.size(); ++i) {
        if (drawable(step_losses[i])) steps.push_back({static_cast<double>(i), step_losses[i]});
    }
    std::vector<EvalPoint> sorted = evals;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const EvalPoint& a, const EvalPoint& b) { return a.step < b.step; });
    for (const EvalPoint& e : sorted) {
        if (drawable(e.train_loss)) train.push_back({static_cast<double>(e.step), e.train_loss});
        if (drawable(e.val_loss)) val.push_back({static_cast<double>(e.step), e.val_loss});
    }
    const bool has_ref = reference_loss && drawable(*reference_loss);

    // The axes: the data's extent (and the reference line's), padded, with nice ticks.
    Range xdata, ydata;
    for (const auto* series : {&steps, &train, &val}) {
        for (const Point& p : *series) {
            xdata.include(p.x);
            ydata.include(p.y);
        }
    }
    const bool no_data = xdata.empty();
    if (no_data) xdata = {0, 10};
    if (has_ref) ydata.include(*reference_loss);
    if (ydata.empty()) ydata = {0, 1};
    const Range xr = axis_limits(xdata, 0.03, 1.0), yr = axis_limits(ydata, 0.06, 0.0);
    const Ticks xt = nice_ticks(xr, 6, 1.0, true), yt = nice_ticks(yr, 5, 0.0, false);

    // The layout: the left margin fits the widest y label; a legend row sits
    // between the title and the plot, so it can never cover the data.
    constexpr double W = 860, H = 520, kTick = 11;
    double ylabel_w = 0;
    for (const auto& l : yt.labels) ylabel_w = std::max(ylabel_w, text_width(l, kTick));
    const double left = std::max(70.0, 40 + ylabel_w + 9);
    const double right = W - std::max(28.0, (xt.labels.empty() ? 0 : text_width(xt.labels.back(), kTick) / 2) + 10);
    struct Entry {
        const char* colour;
        double width;
        bool marker;
        const char* label;
    };
    std::vector<Entry> legend;
    if (!steps.empty()) legend.push_back({kStepColour, 1.5, false, "train loss (every step)"});
    if (!train.empty()) legend.push_back({kTrainColour, 2, true, "train loss (eval)"});
    if (!val.empty()) legend.push_back({kValColour, 2, true, "val loss (eval)"});
    const double top = legend.empty() ? 50 : 74, bottom = H - 58;
    auto px = [&](double x) { return left + (x - xr.lo) / (xr.hi - xr.lo) * (right - left); };
    auto py = [&](double y) { return bottom - (y - yr.lo) / (yr.hi - yr.lo) * (bottom - top); };

    std::string out = svg_open(W, H);
    svg_text(out, (left + right) / 2, 30, title,
             "class=\"title\" font-size=\"16\" font-weight=\"600\" text-anchor=\"middle\" fill=\"#222222\"");
    if (!legend.empty()) {
        // Each entry: a 24 px sample, 6 px, its label, 22 px to the next.
        auto entry_w = [](const Entry& e) { return 24 + 6 + text_width(e.label, 12) + 22; };
        double total = -22;
        for (const Entry& e : legend) total += entry_w(e);
        double x = (left + right - total) / 2;
        out += "<g class=\"legend\" font-size=\"12\" fill=\"#333333\">\n";
        for (const Entry& e : legend) {
            out += legend_sample(x, 52, e.colour, e.width, e.marker);
            svg_text(out, x + 30, 56, e.label);
            x += entry_w(e);
        }
        out += "</g>\n";
    }

    // Grid lines under everything, then the reference, the data, the frame.
    out += "<g class=\"grid\" stroke=\"#e9e9e9\" stroke-width=\"1\">\n";
    for (double v : xt.values) out += line(px(v), top, px(v), bottom);
    for (double v : yt.values) out += line(left, py(v), right, py(v));
    out += "</g>\n";
    if (has_ref) {
        out += line(left, py(*reference_loss), right, py(*reference_loss),
                    "class=\"reference\" stroke=\"#777777\" stroke-width=\"1.2\" stroke-dasharray=\"6 4\"");
    }
    std::vector<Point> step_px;
    for (const Point& p : steps) step_px.push_back({px(p.x), py(p.y)});
    if (step_px.size() == 1) {
        out += "<circle class=\"step-loss\" cx=\"" + num(step_px[0].x) + "\" cy=\"" + num(step_px[0].y) +
               "\" r=\"3.5\" fill=\"" + kStepColour + "\"/>\n";
    } else if (step_px.size() > 1) {
        out += "<polyline class=\"step-loss\" fill=\"none\" stroke=\"" + std::string(kStepColour) +
               "\" stroke-width=\"1.2\" stroke-linejoin=\"round\" points=\"" + points_attr(thin_line(step_px)) +
               "\"/>\n";
    }
    for (const auto& [series, name, colour] :
         {std::tuple{&train, "eval-train", kTrainColour}, std::tuple{&val, "eval-val", kValColour}}) {
        std::vector<Point> pts;
        for (const Point& p : *series) pts.push_back({px(p.x), py(p.y)});
        if (pts.empty()) continue;
        if (pts.size() > 1) {
            out += "<polyline class=\"" + std::string(name) + "\" fill=\"none\" stroke=\"" + colour +
                   "\" stroke-width=\"2\" stroke-linejoin=\"round\" points=\"" + points_attr(pts) + "\"/>\n";
        }
        out += "<g class=\"" + std::string(name) + "-markers\" fill=\"" + colour +
               "\" stroke=\"#ffffff\" stroke-width=\"1\">\n";
        for (const Point& p : pts) out += "<circle cx=\"" + num(p.x) + "\" cy=\"" + num(p.y) + "\" r=\"3.5\"/>\n";
        out += "</g>\n";
    }
    out += "<rect class=\"plot-area\" x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(right - left) +
           "\" height=\"" + num(bottom - top) + "\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1\"/>\n";

    // Ticks and their labels, then the axis labels.
    out += "<g class=\"x-ticks\" font-size=\"11\" text-anchor=\"middle\" fill=\"#333333\">\n";
    for (size_t i = 0; i < xt.values.size(); ++i) {
        out += line(px(xt.values[i]), bottom, px(xt.values[i]), bottom + 5, "stroke=\"#333333\"");
        svg_text(out, px(xt.values[i]), bottom + 19, xt.labels[i]);
    }
    out += "</g>\n<g class=\"y-ticks\" font-size=\"11\" text-anchor=\"end\" fill=\"#333333\">\n";
    for (size_t i = 0; i < yt.values.size(); ++i) {
        out += line(left - 5, py(yt.values[i]), left, py(yt.values[i]), "stroke=\"#333333\"");
        svg_text(out, left - 9, py(yt.values[i]) + 4, yt.labels[i]);
    }
    out += "</g>\n";
    svg_text(out, (left + right) / 2, H - 14, "step",
             "class=\"x-label\" font-size=\"13\" text-anchor=\"middle\" fill=\"#222222\"");
    const double ymid = (top + bottom) / 2;
    svg_text(out, 0, 0, "loss",
             "class=\"y-label\" font-size=\"13\" text-anchor=\"middle\" fill=\"#222222\" transform=\"translate(" +
                 num(left - 18 - ylabel_w) + "," + num(ymid) + ") rotate(-90)\"");

    // The reference line's label sits above its right end, on a white halo so
    // that it stays readable where the curve passes behind it.
    if (has_ref) {
        const std::string label = reference_label.empty() ? fixed(*reference_loss, 3) : reference_label;
        svg_text(out, right - 8, py(*reference_loss) - 6, label,
                 "class=\"reference-label\" font-size=\"11\" text-anchor=\"end\" fill=\"#555555\" stroke=\"#ffffff\" "
                 "stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\"");
    }
    if (no_data) {
        svg_text(out, (left + right) / 2, ymid, "no finite loss values to plot",
                 "class=\"no-data\" font-size=\"13\" text-anchor=\"middle\" fill=\"#888888\"");
    }
    out += "</svg>\n";
    return out;
}

void write_loss_curve_svg(const std::string& path, const std::vector<double>& step_losses,
                          const std::vector<EvalPoint>& evals, const std::string& title,
                          std::optional<double> reference_loss, const std::string& reference_label) {
    write_atomically(path, loss_curve_svg(step_losses, evals, title, reference_loss, reference_label),
                     "[write_loss_curve_svg] ");
}

// ---- the attention map --------------------------------------------------------

// Sizes. A heatmap is T x T square cells of side `cell` px: 384/T, so that a
// heatmap is about 384 px across, kept between 9 px (so that at T = 64 the
// labels are still 8 px, legible at the picture's natural size; 6 x 6 heads
// of T = 64 then make a picture about 3700 x 3900 px, for scrolling or
// zooming) and 24 px (so that a short prompt does not make giant blocks).
// Labels are 0.7 of a cell, between 8 and 13 px.
std::string attention_svg(const std::vector<std::string>& tokens,
                          const std::vector<std::vector<std::vector<float>>>& maps, const std::string& title) {
    const std::string op = "[attention_svg] ";
    const size_t T = tokens.size();
    if (T == 0) throw std::invalid_argument(op + "the prompt is empty (T = 0): there are no positions to draw");
    if (maps.empty()) {
        throw std::invalid_argument(op + "maps is empty (0 layers): expected maps[layer][head], each a T x T = " +
                                    std::to_string(T) + " x " + std::to_string(T) + " matrix");
    }
    const size_t heads = maps[0].size();
    for (size_t l = 0; l < maps.size(); ++l) {
        if (maps[l].empty())
            throw std::invalid_argument(op + "layer " + std::to_string(l) + " has no heads (maps[" + std::to_string(l) +
                                        "] is empty)");
        if (maps[l].size() != heads) {
            throw std::invalid_argument(op + "layer " + std::to_string(l) + " has " + std::to_string(maps[l].size()) +
                                        " heads but layer 0 has " + std::to_string(heads) +
                                        ": the grid needs the same number in every layer");
        }
        for (size_t h = 0; h < heads; ++h) {
            if (maps[l][h].size() != T * T) {
                throw std::invalid_argument(op + "maps[" + std::to_string(l) + "][" + std::to_string(h) + "] has " +
                                            std::to_string(maps[l][h].size()) +
                                            " weights, expected T*T = " + std::to_string(T * T) +
                                            " (T = " + std::to_string(T) + ", the prompt's length)");
            }
        }
    }
    const size_t layers = maps.size();
    bool any_nan = false;
    for (const auto& layer : maps) {
        for (const auto& m : layer)
            any_nan = any_nan || std::any_of(m.begin(), m.end(), [](float w) { return std::isnan(w); });
    }

    const int t = static_cast<int>(std::min<size_t>(T, 1 << 20));
    const int cell = std::clamp(384 / t, 9, 24);
    const double label_size = std::clamp(0.7 * cell, 8.0, 13.0);
    // The labels are the same for every heatmap: make them once.
    std::vector<std::string> labels(T);
    std::vector<bool> signs(T);
    size_t longest = 1; // characters
    for (size_t i = 0; i < T; ++i) {
        bool sign = false;
        size_t length = 0;
        labels[i] = token_label(tokens[i], sign, length);
        signs[i] = sign;
        longest = std::max(longest, length + (length == 12 ? 1 : 0));
    }
    // One character a position fits above its column; longer labels (BPE
    // tokens) are turned to read upwards, and the gutters grow to fit them.
    const bool upright = longest == 1;
    const int label_w = static_cast<int>(std::ceil(0.62 * label_size * static_cast<double>(longest))); // mono
    const int gutter_left = label_w + 8;
    const int gutter_top = upright ? static_cast<int>(std::ceil(label_size)) + 5 : label_w + 8;
    const int title_h = 22, gap_x = 36, gap_y = 30, margin = 28, header = 86;
    const int side = t * cell;
    // A slot is one heatmap with its labels and title; the title may be wider than a small matrix.
    const int slot_w =
        std::max(gutter_left + side, gutter_left + static_cast<int>(text_width("layer 00, head 00", 13)));
    const int slot_h = title_h + gutter_top + side;
    const int grid_w = static_cast<int>(heads) * slot_w + static_cast<int>(heads - 1) * gap_x;
    // Row 1 of a causal map holds one weight, always 1: the scale stays 0 to
    // 1 for every row, so that equal colours mean equal weights.
    const std::string subtitle = "rows: the query (attending)  \xC2\xB7  columns: the key (attended to)  \xC2\xB7  "
                                 "row 1 sees only itself, so its weight is always 1" +
                                 std::string(any_nan ? "  \xC2\xB7  red: NaN" : "");
    const int bar_w = 140;
    const int head_w = static_cast<int>(std::max(text_width(title, 18) + 60 + bar_w + 40, text_width(subtitle, 12)));
    const int W = std::max(grid_w, head_w) + 2 * margin;
    const int H = header + static_cast<int>(layers) * slot_h + static_cast<int>(layers - 1) * gap_y + margin;
    const int grid_x = (W - grid_w) / 2;

    std::string out = svg_open(W, H);
    out += "<defs><linearGradient id=\"weight-scale\" x1=\"0\" y1=\"0\" x2=\"1\" y2=\"0\">";
    for (size_t i = 0; i < kBlues.size(); ++i) {
        out += "<stop offset=\"" + num(static_cast<double>(i) / (kBlues.size() - 1)) + "\" stop-color=\"" +
               hex(kBlues[i][0], kBlues[i][1], kBlues[i][2]) + "\"/>";
    }
    out += "</linearGradient></defs>\n";
    svg_text(out, margin, 36, title, "class=\"title\" font-size=\"18\" font-weight=\"600\" fill=\"#222222\"");
    svg_text(out, margin, 62, subtitle, "class=\"subtitle\" font-size=\"12\" fill=\"#555555\"");

    // The colour scale, top right: what white and dark blue mean.
    const double bar_x = W - margin - 12 - bar_w;
    out += "<g class=\"colour-scale\" font-size=\"11\" fill=\"#444444\">\n";
    svg_text(out, bar_x + bar_w / 2.0, 24, "attention weight", "text-anchor=\"middle\"");
    out += "<rect x=\"" + num(bar_x) + "\" y=\"31\" width=\"" + std::to_string(bar_w) +
           "\" height=\"10\" fill=\"url(#weight-scale)\" stroke=\"#999999\" stroke-width=\"0.5\"/>\n";
    svg_text(out, bar_x - 5, 40, "0", "text-anchor=\"end\"");
    svg_text(out, bar_x + bar_w + 5, 40, "1");
    out += "</g>\n";

    // Signs (␣ ⏎ → �) in grey, so they read as stand-ins rather than characters.
    auto label_attrs = [&](size_t i) { return signs[i] ? std::string("fill=\"#808080\"") : std::string(); };

    for (size_t l = 0; l < layers; ++l) {
        for (size_t h = 0; h < heads; ++h) {
            const int sx = grid_x + static_cast<int>(h) * (slot_w + gap_x);
            const int sy = header + static_cast<int>(l) * (slot_h + gap_y);
            const int mx = sx + gutter_left + (slot_w - gutter_left - side) / 2; // the matrix's corner
            const int my = sy + title_h + gutter_top;
            out += "<g class=\"heatmap\">\n";
            svg_text(
                out, mx + side / 2.0, sy + 14, "layer " + std::to_string(l + 1) + ", head " + std::to_string(h + 1),
                "class=\"heatmap-title\" font-size=\"13\" font-weight=\"600\" text-anchor=\"middle\" fill=\"#333333\"");
            // Keys across the top, queries down the side, each centred on its cell.
            out += "<g class=\"key-labels\" font-family=\"" + std::string(kMono) + "\" font-size=\"" + num(label_size) +
                   "\" text-anchor=\"middle\" fill=\"#222222\">\n";
            for (size_t k = 0; k < T; ++k) {
                if (upright) {
                    svg_text(out, mx + (k + 0.5) * cell, my - 4, labels[k], label_attrs(k));
                } else {
                    const double x = mx + (k + 0.5) * cell + 0.35 * label_size, y = my - 4;
                    std::string attrs = "text-anchor=\"start\" transform=\"rotate(-90 ";
                    attrs.append(num(x)).append(" ").append(num(y)).append(")\"");
                    if (signs[k]) attrs.append(" ").append(label_attrs(k));
                    svg_text(out, x, y, labels[k], attrs);
                }
            }
            out += "</g>\n<g class=\"query-labels\" font-family=\"" + std::string(kMono) + "\" font-size=\"" +
                   num(label_size) + "\" text-anchor=\"end\" fill=\"#222222\">\n";
            for (size_t q = 0; q < T; ++q) {
                svg_text(out, mx - 4, my + (q + 0.5) * cell + 0.35 * label_size, labels[q], label_attrs(q));
            }
            // The cells, row by row, in the matrix's own coordinates: cell
            // (q, k) at (k * cell, q * cell). crispEdges keeps neighbouring
            // cells from showing hairline seams of background between them.
            out += "</g>\n<g class=\"cells\" transform=\"translate(" + std::to_string(mx) + "," + std::to_string(my) +
                   ")\" shape-rendering=\"crispEdges\">\n";
            const std::vector<float>& m = maps[l][h];
            const std::string size_attrs =
                "\" width=\"" + std::to_string(cell) + "\" height=\"" + std::to_string(cell) + "\" fill=\"";
            for (size_t q = 0; q < T; ++q) {
                for (size_t k = 0; k < T; ++k) {
                    out += "<rect x=\"" + std::to_string(k * cell) + "\" y=\"" + std::to_string(q * cell) + size_attrs +
                           weight_colour(m[q * T + k]) + "\"/>\n";
                }
            }
            out += "</g>\n<rect class=\"frame\" x=\"" + num(mx - 0.5) + "\" y=\"" + num(my - 0.5) + "\" width=\"" +
                   std::to_string(side + 1) + "\" height=\"" + std::to_string(side + 1) +
                   "\" fill=\"none\" stroke=\"#9a9a9a\" stroke-width=\"1\"/>\n</g>\n";
        }
    }
    out += "</svg>\n";
    return out;
}

// A prompt of bytes: one position, and one label, per byte.
std::string attention_svg(const std::string& prompt, const std::vector<std::vector<std::vector<float>>>& maps,
                          const std::string& title) {
    std::vector<std::string> bytes;
    for (char c : prompt) bytes.emplace_back(1, c);
    return attention_svg(bytes, maps, title);
}

void write_attention_svg(const std::string& path, const std::vector<std::string>& tokens,
                         const std::vector<std::vector<std::vector<float>>>& maps, const std::string& title) {
    write_atomically(path, attention_svg(tokens, maps, title), "[write_attention_svg] ");
}

void write_attention_svg(const std::string& path, const std::string& prompt,
                         const std::vector<std::vector<std::vector<float>>>& maps, const std::string& title) {
    write_atomically(path, attention_svg(prompt, maps, title), "[write_attention_svg] ");
}

// ---- a chart of named lines ---------------------------------------------------

// matplotlib's tab10, the default colour cycle.
constexpr std::array<const char*, 10> kTab10 = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string lines_svg(const std::string& title, const std::string& subtitle, const std::string& x_label,
                      const std::string& y_label, const std::vector<Series>& series, std::optional<double> reference_y,
                      const std::string& reference_label) {
    auto drawable = [](double v) { return std::isfinite(v) && std::abs(v) <= 1e300; };
    Range xdata, ydata;
    for (const Series& s : series)
        for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
            if (drawable(s.x[i]) && drawable(s.y[i])) xdata.include(s.x[i]), ydata.include(s.y[i]);
    const bool no_data = xdata.empty();
    if (no_data) xdata = {0, 1};
    const bool has_ref = reference_y && drawable(*reference_y);
    if (has_ref) ydata.include(*reference_y);
    if (ydata.empty()) ydata = {0, 1};
    const Range xr = axis_limits(xdata, 0.03, 0.0), yr = axis_limits(ydata, 0.06, 0.0);
    const Ticks xt = nice_ticks(xr, 6, 0.0, false), yt = nice_ticks(yr, 5, 0.0, false);

    // The layout: the legend is a column at the right, as wide as its longest label.
    constexpr double kTick = 11, kRow = 17;
    double legend_w = 0;
    for (const Series& s : series) legend_w = std::max(legend_w, 30 + text_width(s.label, 11));
    legend_w = std::min(legend_w, 420.0);
    const double W = 640 + (series.empty() ? 0 : legend_w + 24);
    const double H = std::max(460.0, 90 + kRow * static_cast<double>(series.size()) + 20);
    double ylabel_w = 0;
    for (const auto& l : yt.labels) ylabel_w = std::max(ylabel_w, text_width(l, kTick));
    const double left = std::max(70.0, 40 + ylabel_w + 9);
    const double right = 640 - 24;
    const double top = subtitle.empty() ? 50 : 66, bottom = H - 58;
    auto px = [&](double x) { return left + (x - xr.lo) / (xr.hi - xr.lo) * (right - left); };
    auto py = [&](double y) { return bottom - (y - yr.lo) / (yr.hi - yr.lo) * (bottom - top); };

    std::string out = svg_open(W, H);
    svg_text(out, W / 2, 26, title,
             "class=\"title\" font-size=\"16\" font-weight=\"600\" text-anchor=\"middle\" fill=\"#222222\"");
    if (!subtitle.empty())
        svg_text(out, W / 2, 46, subtitle,
                 "class=\"subtitle\" font-size=\"12\" text-anchor=\"middle\" fill=\"#555555\"");
    out += "<g class=\"grid\" stroke=\"#e9e9e9\" stroke-width=\"1\">\n";
    for (double v : xt.values) out += line(px(v), top, px(v), bottom);
    for (double v : yt.values) out += line(left, py(v), right, py(v));
    out += "</g>\n";
    if (has_ref)
        out += line(left, py(*reference_y), right, py(*reference_y),
                    "class=\"reference\" stroke=\"#555555\" stroke-width=\"1.2\" stroke-dasharray=\"6 4\"");
    for (size_t k = 0; k < series.size(); ++k) {
        const Series& s = series[k];
        std::vector<Point> pts;
        for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
            if (drawable(s.x[i]) && drawable(s.y[i])) pts.push_back({px(s.x[i]), py(s.y[i])});
        const std::string dash = s.dashed || k >= kTab10.size() ? " stroke-dasharray=\"5 3\"" : "";
        if (pts.size() == 1)
            out += "<circle cx=\"" + num(pts[0].x) + "\" cy=\"" + num(pts[0].y) + "\" r=\"3\" fill=\"" +
                   kTab10[k % kTab10.size()] + "\"/>\n";
        else if (pts.size() > 1)
            out += "<polyline class=\"series\" fill=\"none\" stroke=\"" + std::string(kTab10[k % kTab10.size()]) +
                   "\" stroke-width=\"1.5\" stroke-linejoin=\"round\"" + dash + " points=\"" +
                   points_attr(thin_line(pts)) + "\"/>\n";
    }
    out += "<rect class=\"plot-area\" x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(right - left) +
           "\" height=\"" + num(bottom - top) + "\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
    out += "<g class=\"x-ticks\" font-size=\"11\" text-anchor=\"middle\" fill=\"#333333\">\n";
    for (size_t i = 0; i < xt.values.size(); ++i) {
        out += line(px(xt.values[i]), bottom, px(xt.values[i]), bottom + 5, "stroke=\"#333333\"");
        svg_text(out, px(xt.values[i]), bottom + 19, xt.labels[i]);
    }
    out += "</g>\n<g class=\"y-ticks\" font-size=\"11\" text-anchor=\"end\" fill=\"#333333\">\n";
    for (size_t i = 0; i < yt.values.size(); ++i) {
        out += line(left - 5, py(yt.values[i]), left, py(yt.values[i]), "stroke=\"#333333\"");
        svg_text(out, left - 9, py(yt.values[i]) + 4, yt.labels[i]);
    }
    out += "</g>\n";
    svg_text(out, (left + right) / 2, H - 14, x_label,
             "class=\"x-label\" font-size=\"13\" text-anchor=\"middle\" fill=\"#222222\"");
    svg_text(out, 0, 0, y_label,
             "class=\"y-label\" font-size=\"13\" text-anchor=\"middle\" fill=\"#222222\" transform=\"translate(" +
                 num(left - 18 - ylabel_w) + "," + num((top + bottom) / 2) + ") rotate(-90)\"");
    if (has_ref && !reference_label.empty())
        svg_text(out, right - 8, py(*reference_y) - 6, reference_label,
                 "class=\"reference-label\" font-size=\"11\" text-anchor=\"end\" fill=\"#555555\" stroke=\"#ffffff\" "
                 "stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\"");
    if (no_data)
        svg_text(out, (left + right) / 2, (top + bottom) / 2, "no finite values to plot",
                 "class=\"no-data\" font-size=\"13\" text-anchor=\"middle\" fill=\"#888888\"");
    if (!series.empty()) {
        out += "<g class=\"legend\" font-size=\"11\" fill=\"#333333\">\n";
        for (size_t k = 0; k < series.size(); ++k) {
            const double y = top + 6 + kRow * static_cast<double>(k);
            out += line(640, y, 664, y,
                        "stroke=\"" + std::string(kTab10[k % kTab10.size()]) + "\" stroke-width=\"2\"" +
                            (series[k].dashed || k >= kTab10.size() ? " stroke-dasharray=\"5 3\"" : ""));
            svg_text(out, 670, y + 4, series[k].label);
        }
        out += "</g>\n";
    }
    out += "</svg>\n";
    return out;
}

void write_lines_svg(const std::string& path, const std::string& title, const std::string& subtitle,
                     const std::string& x_label, const std::string& y_label, const std::vector<Series>& series,
                     std::optional<double> reference_y, const std::string& reference_label) {
    write_atomically(path, lines_svg(title, subtitle, x_label, y_label, series, reference_y, reference_label),
                     "[write_lines_svg] ");
}

} // namespace train
