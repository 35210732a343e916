// The SVG helpers of svg_text.h; see there for what each one is for.
// Tests: tests/test_svg.cpp, tests/test_draw_graph.cpp.
#include "core/tensor/svg_text.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <vector>

#include "core/tensor/platform.h"

namespace ember::internal {

// `v` with exactly `decimals` digits after the point ("2.50"): tick labels
// keep their zeros so a column of them lines up, as matplotlib's do.
std::string fixed(double v, int decimals) {
    char buf[400]; // the longest finite double in fixed notation is 309 digits
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
    std::string s = ec == std::errc{} ? std::string(buf, end) : "0";
    // Never "-0.00": a zero that was a tiny negative loses its sign.
    return s.find_first_not_of("-0.") == std::string::npos ? std::string(s, s[0] == '-') : s;
}

// A coordinate: two decimals at most, trailing zeros dropped ("12.5", "40").
std::string num(double v) {
    std::string s = fixed(v, 2);
    if (s.find('.') != std::string::npos) {
        s.erase(s.find_last_not_of('0') + 1);
        if (s.back() == '.') s.pop_back();
    }
    return s;
}

// Text safe inside an element or a quoted attribute: the five XML specials
// become entities, and anything XML 1.0 cannot hold (control characters, bytes
// that are not well-formed UTF-8) becomes U+FFFD, so a stray byte in a title
// cannot make the whole file unreadable. Tabs and newlines become spaces, as
// SVG would render them anyway.
std::string xml_text(std::string_view s) {
    static constexpr uint32_t kMinCodePoint[5] = {0, 0, 0x80, 0x800, 0x10000};
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            switch (b) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            case '\t':
            case '\n':
            case '\r': out += ' '; break;
            default: out += b < 0x20 ? "\xEF\xBF\xBD" : std::string(1, char(b));
            }
            ++i;
            continue;
        }
        // A multi-byte sequence: its length from the lead byte, then the
        // continuation bytes; overlong forms, surrogates and U+FFFE/FFFF are
        // rejected as XML requires.
        const size_t n = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        bool ok = n != 0 && i + n <= s.size();
        uint32_t cp = n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
        for (size_t k = 1; ok && k < n; ++k) {
            const auto c = static_cast<unsigned char>(s[i + k]);
            ok = (c & 0xC0) == 0x80;
            cp = (cp << 6) | (c & 0x3F);
        }
        ok = ok && cp >= kMinCodePoint[n] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF) && cp != 0xFFFE &&
             cp != 0xFFFF;
        out += ok ? std::string(s.substr(i, n)) : "\xEF\xBF\xBD";
        i += ok ? n : 1;
    }
    return out;
}

// A width in px, for layout only: n characters of DejaVu Sans at `size` px.
// Its digits are 0.64 em wide and most letters less, so 0.62 em errs wide.
double text_width(std::string_view s, double size) {
    const auto chars = std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; });
    return 0.62 * size * static_cast<double>(chars);
}

// `<text>` at (x, y) (y is the baseline) with extra attributes; s is raw text.
void svg_text(std::string& out, double x, double y, std::string_view s, const std::string& attrs) {
    out += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + (attrs.empty() ? "" : " " + attrs) + ">" + xml_text(s) +
           "</text>\n";
}

std::string svg_open(double w, double h) {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
           "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
           num(w) + "\" height=\"" + num(h) + "\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\" font-family=\"" +
           kSvgSans + "\">\n" + "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
}


// One piece, written whole by the platform's writer (core/tensor/platform.cpp).
std::string write_file_whole(const std::string& path, const std::string& text) {
    return write_file_whole(path, std::vector<std::string_view>{text});
}

} // namespace ember::internal
