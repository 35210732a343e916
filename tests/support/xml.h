// A small XML reader for the SVG pictures ember writes (tests/test_svg.cpp,
// tests/test_draw_graph.cpp): enough to check that the text is well-formed and
// to pick out tags, attributes and texts. Plain C++; no XML library.
#pragma once

#include <string>
#include <vector>

namespace ember::testing {

// "" if `xml` is well-formed as far as these pictures need: an optional
// <?xml ...?> declaration, then exactly one element (which must be <svg>),
// every tag closed in order, attribute values quoted, and every '&' the start
// of one of the five predefined entities. Otherwise, what is wrong.
std::string xml_problem(const std::string& xml);

// The start tags `<name ...>` in s, whole (from '<' to '>').
std::vector<std::string> tags(const std::string& s, const std::string& name);

// The value of attribute `name` in a start tag, or "".
std::string attr(const std::string& tag, const std::string& name);

// The texts of the <text> elements in s, in order.
std::vector<std::string> texts(const std::string& s);

} // namespace ember::testing
