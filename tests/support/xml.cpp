// The XML reader of xml.h.
#include "xml.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>

namespace ember::testing {

// "" if `xml` is well-formed as far as these pictures need: an optional
// <?xml ...?> declaration, then exactly one element (which must be <svg>),
// every tag closed in order, attribute values quoted, and every '&' the start
// of one of the five predefined entities. Otherwise, what is wrong.
std::string xml_problem(const std::string& xml) {
    std::vector<std::string> open;
    size_t i = 0, roots = 0;
    if (xml.rfind("<?xml", 0) == 0) i = xml.find("?>") + 2;
    while (i < xml.size()) {
        if (xml[i] == '&') {
            static const char* kEntities[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
            if (std::none_of(std::begin(kEntities), std::end(kEntities),
                             [&](const char* e) { return xml.compare(i, std::strlen(e), e) == 0; })) {
                return "bare '&' at " + std::to_string(i);
            }
        }
        if (xml[i] == '>') return "bare '>' at " + std::to_string(i);
        if (xml[i] != '<') {
            if (open.empty() && !std::isspace(static_cast<unsigned char>(xml[i]))) return "text outside the root";
            ++i;
            continue;
        }
        // A tag: read to its '>', skipping quoted attribute values, which must not hold '<'.
        size_t j = i + 1;
        char quote = 0;
        for (; j < xml.size() && (quote || xml[j] != '>'); ++j) {
            if (quote && xml[j] == '<') return "'<' inside an attribute at " + std::to_string(j);
            if (xml[j] == '"' || xml[j] == '\'') quote = quote == 0 ? xml[j] : (quote == xml[j] ? 0 : quote);
        }
        if (j == xml.size()) return "unterminated tag at " + std::to_string(i);
        const std::string tag = xml.substr(i + 1, j - i - 1);
        const bool closing = tag[0] == '/', empty = tag.back() == '/';
        const std::string name = tag.substr(closing, tag.find_first_of(" \n/", closing) - closing);
        if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) return "bad tag name <" + tag + ">";
        if (closing) {
            if (open.empty() || open.back() != name)
                return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">");
            open.pop_back();
        } else {
            if (open.empty()) {
                ++roots;
                if (name != "svg") return "root is <" + name + ">";
            }
            if (!empty) open.push_back(name);
        }
        i = j + 1;
    }
    if (!open.empty()) return "<" + open.back() + "> never closed";
    return roots == 1 ? "" : std::to_string(roots) + " root elements";
}

// The start tags `<name ...>` in s, whole (from '<' to '>').
std::vector<std::string> tags(const std::string& s, const std::string& name) {
    std::vector<std::string> out;
    for (size_t i = s.find("<" + name + " "); i != std::string::npos; i = s.find("<" + name + " ", i + 1)) {
        out.push_back(s.substr(i, s.find('>', i) - i + 1));
    }
    return out;
}

std::string attr(const std::string& tag, const std::string& name) {
    const size_t i = tag.find(" " + name + "=\"");
    if (i == std::string::npos) return "";
    const size_t start = i + name.size() + 3;
    return tag.substr(start, tag.find('"', start) - start);
}

// The texts of the <text> elements in s, in order.
std::vector<std::string> texts(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = s.find("<text"); i != std::string::npos; i = s.find("<text", i + 1)) {
        const size_t start = s.find('>', i) + 1;
        out.push_back(s.substr(start, s.find("</text>", start) - start));
    }
    return out;
}

} // namespace ember::testing
