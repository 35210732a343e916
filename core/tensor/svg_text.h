// The small pieces every SVG picture ember writes shares: numbers that ignore
// the C locale, text that is always well-formed XML, a width estimate for
// layout, the <svg> header, and writing a file whole or not at all.
// Private to ember (namespace ember::internal). Users: the autograd graph
// (core/autograd/draw_graph.cpp) and train_gpt's loss curve and attention map
// (examples/train/svg.cpp). Tests: tests/test_svg.cpp, tests/test_draw_graph.cpp.
#pragma once

#include <string>
#include <string_view>

namespace ember::internal {

// The font list every picture asks for (viewers pick the first they have).
inline constexpr const char* kSvgSans = "DejaVu Sans, Helvetica, Arial, sans-serif";

// `v` with exactly `decimals` digits after the point ("2.50"), never "-0.00".
// std::to_chars ignores the C locale: a German locale must not write "1,5".
std::string fixed(double v, int decimals);

// A coordinate: two decimals at most, trailing zeros dropped ("12.5", "40").
std::string num(double v);

// Text safe inside an element or a quoted attribute: the five XML specials
// become entities, and anything XML 1.0 cannot hold (control characters,
// bytes that are not well-formed UTF-8) becomes U+FFFD. Tabs and newlines
// become spaces, as SVG would render them anyway.
std::string xml_text(std::string_view s);

// A width in px, for layout only: n characters of DejaVu Sans at `size` px.
double text_width(std::string_view s, double size);

// Appends `<text>` at (x, y) (y is the baseline) with extra attributes; s is raw text.
void svg_text(std::string& out, double x, double y, std::string_view s, const std::string& attrs = "");

// The XML declaration, the <svg> element of width w and height h (px) and a
// white background rectangle.
std::string svg_open(double w, double h);

// Writes `text` to `path` whole or not at all (platform.h's
// write_file_whole: a new temporary file beside it, flushed, then renamed
// onto it). Returns "" on success, else why it failed ("No space left on
// device (the previous file, if any, is unchanged)"); the caller names the
// file and throws the error type its API promises.
std::string write_file_whole(const std::string& path, const std::string& text);

} // namespace ember::internal
