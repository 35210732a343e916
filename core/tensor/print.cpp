// The printer: `std::cout << tensor` and to_string(tensor), character for
// character as PyTorch 1.13 prints a CPU tensor (torch/_tensor_str.py), for
// float32, float64, int64 and bool tensors of any shape, contiguous or not,
// in torch's three steps (below). Printing only reads memory: it records no
// autograd history. Rules and a worked example: docs/printing.md. Tests:
// tests/test_print.cpp.
#include "core/tensor/print.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/autograd/autograd.h"
#include "core/tensor/tensor.h"

// The three steps: a Formatter looks at the elements that will be shown and
// picks one notation (integer, fixed or scientific) and one width for the
// whole tensor; the nested brackets are laid out, summarised with "..." past
// the threshold and wrapped at the line width; then the suffixes (size,
// dtype, grad_fn or requires_grad) are appended.

namespace ember {

// ---- options ------------------------------------------------------------------------

namespace {

// The printer's one global. STYLE rule 11 allows no hidden global state; this
// one is allowed because PyTorch has exactly the same global (PRINT_OPTS in
// torch/_tensor_str.py), set through the same public set_printoptions.
PrintOptions& current_options() {
    static PrintOptions options;
    return options;
}

} // namespace

void set_printoptions(const PrintOptions& options) {
    // precision is capped only so that a number's text has a known bound.
    if (options.precision < 0 || options.precision > 1000)
        fail<ValueError>("set_printoptions", "precision must be between 0 and 1000, got ", options.precision);
    // torch accepts edgeitems=0 but then prints every element of a 1-D tensor
    // after the "..." (its slice self[-0:] is the whole tensor) and fails on
    // n-D tensors, so ember refuses it up front.
    if (options.edgeitems < 1)
        fail<ValueError>("set_printoptions", "edgeitems must be at least 1, got ", options.edgeitems);
    current_options() = options;
}

void set_printoptions(std::optional<int64_t> precision, std::optional<double> threshold,
                      std::optional<int64_t> edgeitems, std::optional<int64_t> linewidth,
                      std::optional<bool> sci_mode) {
    PrintOptions options = current_options();
    if (precision) options.precision = *precision;
    if (threshold) options.threshold = *threshold;
    if (edgeitems) options.edgeitems = *edgeitems;
    if (linewidth) options.linewidth = *linewidth;
    options.sci_mode = sci_mode; // torch assigns sci_mode unconditionally, None included
    set_printoptions(options);
}

const PrintOptions& get_printoptions() { return current_options(); }

namespace {

// ---- numbers as Python formats them -------------------------------------------------

// Python's format(x, '.{precision}f') (Fixed) or '.{precision}e' (Scientific)
// of a float. Both Python and std::to_chars round the exact binary value to
// nearest, ties to even (format(1.03125, '.4f') is '1.0312'), and both write
// at least two exponent digits (1.0000e+10, 1.0000e-05, 1.0000e+300).
// to_chars, unlike printf, ignores the C locale's decimal comma. Python spells
// the non-finite values inf, -inf and nan, never "-nan".
std::string python_format(double x, std::chars_format style, int64_t precision) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
    // The longest text is fixed notation of ~1.8e308: 309 digits, a sign, a
    // point and `precision` decimals.
    std::string text(static_cast<size_t>(precision) + 320, '\0');
    auto result = std::to_chars(text.data(), text.data() + text.size(), x, style, static_cast<int>(precision));
    text.resize(static_cast<size_t>(result.ptr - text.data()));
    return text;
}

// Python's str() of an int64 or bool element: 42, -7, True, False.
std::string python_str(int64_t v) { return std::to_string(v); }
std::string python_str(bool v) { return v ? "True" : "False"; }

int64_t length(const std::string& s) { return static_cast<int64_t>(s.size()); }

// Right-aligns s in `width` characters, as Python's '{:>w}' (a no-op when s is wider).
std::string pad_left(const std::string& s, int64_t width) {
    return s.size() >= static_cast<size_t>(width) ? s : std::string(static_cast<size_t>(width) - s.size(), ' ') + s;
}

// ---- the formatter: one notation and one width per tensor ---------------------------

// torch's _Formatter. It sees only the elements that will be printed (the
// edges, when the tensor is summarised), so a huge value hidden behind "..."
// changes nothing.
template <typename T>
class Formatter {
public:
    Formatter(const std::vector<T>& shown, const PrintOptions& options) : precision_(options.precision) {
        if constexpr (!std::is_floating_point_v<T>) {
            // int64 and bool: str() of each value, right-aligned to the widest.
            for (T v : shown) width_ = std::max(width_, length(python_str(v)));
        } else {
            // Zeros, infinities and NaNs print alike in every notation, so only
            // the finite non-zero values decide it.
            std::vector<double> values;
            for (T v : shown)
                if (std::isfinite(v) && v != 0) values.push_back(static_cast<double>(v));
            // No such value: integer notation, width 1 -- and torch returns
            // before it reads the sci_mode option, so the option is ignored too.
            if (values.empty()) return;

            double min_abs = std::abs(values[0]), max_abs = min_abs;
            for (double v : values) {
                min_abs = std::min(min_abs, std::abs(v));
                max_abs = std::max(max_abs, std::abs(v));
                if (v != std::ceil(v)) int_mode_ = false;
            }
            // Scientific notation when fixed notation would crush the small
            // values next to the large ones (a spread of more than 1000x) or
            // grow too long (anything above 1e8); for non-integers also when
            // the smallest is below 1e-4, of which 4 decimals keep at most one
            // digit. These thresholds are torch's; they ignore the precision option.
            bool spread = max_abs / min_abs > 1000.0 || max_abs > 1.0e8;
            if (int_mode_) {
                sci_mode_ = spread;
            } else {
                sci_mode_ = spread || min_abs < 1.0e-4;
            }
            for (double v : values) {
                int64_t w = sci_mode_   ? length(python_format(v, std::chars_format::scientific, precision_))
                            : int_mode_ ? length(python_format(v, std::chars_format::fixed, 0)) + 1 // the "."
                                        : length(python_format(v, std::chars_format::fixed, precision_));
                width_ = std::max(width_, w);
            }
            // A forced notation keeps the width measured in the natural one, as torch.
            if (options.sci_mode) sci_mode_ = *options.sci_mode;
        }
    }

    int64_t width() const { return width_; }

    std::string format(T value) const {
        if constexpr (!std::is_floating_point_v<T>) {
            return pad_left(python_str(value), width_);
        } else {
            // PyTorch formats the element converted to a Python float (a double).
            double v = static_cast<double>(value);
            std::string text;
            if (sci_mode_) {
                text = python_format(v, std::chars_format::scientific, precision_);
            } else if (int_mode_) {
                // "2." rather than "2": the point says the tensor is floating.
                text = python_format(v, std::chars_format::fixed, 0);
                if (std::isfinite(v)) text += ".";
            } else {
                text = python_format(v, std::chars_format::fixed, precision_);
            }
            return pad_left(text, width_);
        }
    }

private:
    int64_t precision_;
    bool int_mode_ = true;
    bool sci_mode_ = false;
    int64_t width_ = 1;
};

// ---- which elements are shown -------------------------------------------------------

// Stands for the "..." between the two edges of a summarised dimension.
constexpr int64_t kEllipsis = -1;

// The indices printed along a dimension of `size`: all of them, or, when the
// tensor is summarised and the dimension is longer than both edges, the first
// and last `edgeitems` with kEllipsis between them.
std::vector<int64_t> shown_indices(int64_t size, bool summarize, int64_t edgeitems) {
    std::vector<int64_t> indices;
    if (summarize && size > 2 * edgeitems) {
        for (int64_t i = 0; i < edgeitems; ++i) indices.push_back(i);
        indices.push_back(kEllipsis);
        for (int64_t i = size - edgeitems; i < size; ++i) indices.push_back(i);
    } else {
        for (int64_t i = 0; i < size; ++i) indices.push_back(i);
    }
    return indices;
}

// The elements of a (possibly non-contiguous) tensor, addressed through its
// strides: element (i, j, ...) is data[i*strides[0] + j*strides[1] + ...].
template <typename T>
struct Elements {
    const T* data;
    const Shape& shape;
    const Shape& strides;
    bool summarize;
    const PrintOptions& options;
};

// Appends the shown elements of the sub-tensor at dimension `d`, storage
// offset `offset`, to `out` (torch's get_summarized_data, flattened).
template <typename T>
void collect_shown(const Elements<T>& e, size_t d, int64_t offset, std::vector<T>& out) {
    if (d == e.shape.size()) {
        out.push_back(e.data[offset]);
        return;
    }
    for (int64_t i : shown_indices(e.shape[d], e.summarize, e.options.edgeitems))
        if (i != kEllipsis) collect_shown(e, d + 1, offset + i * e.strides[d], out);
}

// ---- layout -------------------------------------------------------------------------

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
        if (i > 0) out += separator;
        out += parts[i];
    }
    return out;
}

// A 1-D row: "[a, b, c]", wrapped after as many elements as fit in the line
// width, continuation lines indented to just inside the bracket. Every element
// counts as width + 2 characters (its ", "); the " ..." of a summarised row
// counts as an element too (torch's _vector_str).
template <typename T>
std::string row_str(const Elements<T>& e, const Formatter<T>& formatter, size_t d, int64_t offset, int64_t indent) {
    int64_t element_length = formatter.width() + 2;
    // Python's floor((linewidth - indent) / element_length), at least one
    // element per line even when the indent eats the whole width.
    auto per_line = static_cast<int64_t>(
        std::floor(static_cast<double>(e.options.linewidth - indent) / static_cast<double>(element_length)));
    per_line = std::max<int64_t>(1, per_line);

    std::vector<std::string> items;
    for (int64_t i : shown_indices(e.shape[d], e.summarize, e.options.edgeitems))
        items.push_back(i == kEllipsis ? " ..." : formatter.format(e.data[offset + i * e.strides[d]]));

    std::vector<std::string> lines;
    for (size_t start = 0; start < items.size(); start += static_cast<size_t>(per_line)) {
        size_t stop = std::min(items.size(), start + static_cast<size_t>(per_line));
        std::vector<std::string> line(items.begin() + static_cast<std::ptrdiff_t>(start),
                                      items.begin() + static_cast<std::ptrdiff_t>(stop));
        lines.push_back(join(line, ", "));
    }
    return "[" + join(lines, ",\n" + std::string(static_cast<size_t>(indent + 1), ' ')) + "]";
}

// The sub-tensor at dimension `d`, storage offset `offset`, whose "[" sits in
// column `indent` (torch's _tensor_str_with_formatter). Sub-tensors are
// separated by a comma and one newline per remaining dimension minus one --
// rows by one newline, matrices by a blank line, 3-D blocks by two -- and are
// indented one column further than their parent's bracket.
template <typename T>
std::string block_str(const Elements<T>& e, const Formatter<T>& formatter, size_t d, int64_t offset, int64_t indent) {
    size_t dims_left = e.shape.size() - d;
    if (dims_left == 0) return formatter.format(e.data[offset]);
    if (dims_left == 1) return row_str(e, formatter, d, offset, indent);

    std::vector<std::string> slices;
    for (int64_t i : shown_indices(e.shape[d], e.summarize, e.options.edgeitems))
        slices.push_back(i == kEllipsis ? "..."
                                        : block_str(e, formatter, d + 1, offset + i * e.strides[d], indent + 1));
    std::string separator = "," + std::string(dims_left - 1, '\n') + std::string(static_cast<size_t>(indent + 1), ' ');
    return "[" + join(slices, separator) + "]";
}

// The bracketed values of a non-empty tensor whose "[" sits in column `indent`
// (torch's _tensor_str).
template <typename T>
std::string values_str(const Tensor& t, const PrintOptions& options, int64_t indent) {
    bool summarize = static_cast<double>(t.numel()) > options.threshold;
    Elements<T> e{t.data_ptr<T>(), t.shape(), t.strides(), summarize, options};
    std::vector<T> shown;
    collect_shown(e, 0, 0, shown);
    Formatter<T> formatter(shown, options);
    return block_str(e, formatter, 0, 0, indent);
}

// ---- suffixes -----------------------------------------------------------------------

// Python's str(tuple(shape)): "(0, 3)", and "(0,)" for one dimension.
std::string python_tuple(const Shape& shape) {
    std::vector<std::string> parts;
    for (int64_t s : shape) parts.push_back(std::to_string(s));
    return "(" + join(parts, ", ") + (shape.size() == 1 ? ",)" : ")");
}

// Appends ", suffix" for each suffix, moving one to a new line (indented to
// `indent`) when it would pass the line width; then the closing ")". torch
// measures the last line as two characters longer than it is (the
// `len - rfind("\n") + 1` in _add_suffixes); ember keeps that, so it wraps
// at the same place.
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes, int64_t indent,
                         int64_t linewidth) {
    size_t newline = text.rfind('\n');
    int64_t newline_at = newline == std::string::npos ? -1 : static_cast<int64_t>(newline);
    int64_t last_line = length(text) - newline_at + 1;
    for (const std::string& suffix : suffixes) {
        if (last_line + length(suffix) + 2 > linewidth) {
            text += ",\n" + std::string(static_cast<size_t>(indent), ' ') + suffix;
            last_line = indent + length(suffix);
        } else {
            text += ", " + suffix;
            last_line += length(suffix) + 2;
        }
    }
    return text + ")";
}

} // namespace

// ---- the public entry points --------------------------------------------------------

std::string to_string(const Tensor& t) {
    // Python has no undefined tensor; this is libtorch's text for one.
    if (!t.defined()) return "[ Tensor (undefined) ]";
    const PrintOptions& options = current_options();
    const std::string prefix = "tensor(";
    const int64_t indent = length(prefix);

    std::vector<std::string> suffixes;
    std::string body;
    if (t.numel() == 0) {
        // No element to show the shape or the dtype, so both are spelled out:
        // the shape unless it is (0,), the dtype unless it is float32 (an
        // empty int64 tensor prints dtype=torch.int64).
        if (t.dim() != 1) suffixes.push_back("size=" + python_tuple(t.shape()));
        if (t.dtype() != kFloat32) suffixes.push_back(std::string("dtype=torch.") + dtype_name(t.dtype()));
        body = "[]";
    } else {
        // The values show int64 and bool; float32 is the default dtype; only
        // float64 needs saying.
        if (t.dtype() == kFloat64) suffixes.push_back("dtype=torch.float64");
        body = dispatch(t.dtype(), [&]<typename T>(TypeTag<T>) { return values_str<T>(t, options, indent); });
    }
    if (t.grad_fn()) suffixes.push_back("grad_fn=<" + t.grad_fn()->name() + ">");
    else if (t.requires_grad()) suffixes.push_back("requires_grad=True");
    return add_suffixes(prefix + body, suffixes, indent, options.linewidth);
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << to_string(t); }

} // namespace ember
