// Fixture reader: see fixtures.h.
#include "fixtures.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ember::testing {

namespace {

Shape parse_shape(const std::string& s) {
    // "(2,3)" or "()"
    Shape shape;
    std::string body = s.substr(1, s.size() - 2);
    std::stringstream in(body);
    std::string part;
    while (std::getline(in, part, ',')) shape.push_back(std::stoll(part));
    return shape;
}

// Undoes json.dumps for the strings we write (ASCII, with \n \" \\ \t and \uXXXX).
std::string parse_json_string(const std::string& s) {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
        char c = s[i];
        if (c != '\\') {
            out += c;
            continue;
        }
        char e = s[++i];
        switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'u': {
            unsigned code = std::stoul(s.substr(i + 1, 4), nullptr, 16);
            if (code > 0x7f) throw std::runtime_error("fixture text: non-ASCII escape not supported");
            out += static_cast<char>(code);
            i += 4;
            break;
        }
        default: throw std::runtime_error(std::string("fixture text: unknown escape \\") + e);
        }
    }
    return out;
}

} // namespace

Fixtures::Fixtures(const std::string& family) : family_(family) {
    std::string path = std::string(EMBER_FIXTURE_DIR) + "/" + family + ".txt";
    std::ifstream file(path);
    if (!file) throw std::runtime_error("cannot open fixture file " + path);
    std::string line;
    while (std::getline(file, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        std::string kind, name;
        in >> kind >> name;
        if (kind == "text") {
            std::string rest;
            std::getline(in, rest);
            texts_[name] = parse_json_string(rest.substr(1));
            continue;
        }
        std::string dtype, shape_text;
        in >> dtype >> shape_text;
        Shape shape = parse_shape(shape_text);
        std::string v;
        if (dtype == "float32" || dtype == "float64") {
            std::vector<double> values;
            while (in >> v) values.push_back(std::strtod(v.c_str(), nullptr)); // reads hex floats, inf, nan
            tensors_[name] = from_vector(values, Shape{static_cast<int64_t>(values.size())},
                                         dtype == "float32" ? kFloat32 : kFloat64)
                                 .reshape(shape);
        } else {
            std::vector<int64_t> values;
            while (in >> v) values.push_back(std::stoll(v));
            tensors_[name] =
                from_vector(values, Shape{static_cast<int64_t>(values.size())}, dtype == "bool" ? kBool : kInt64)
                    .reshape(shape);
        }
    }
}

Tensor Fixtures::tensor(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw std::runtime_error("fixture " + family_ + ":" + name + " not found");
    return it->second.clone();
}

const std::string& Fixtures::text(const std::string& name) const {
    auto it = texts_.find(name);
    if (it == texts_.end()) throw std::runtime_error("fixture " + family_ + ":" + name + " not found");
    return it->second;
}

} // namespace ember::testing
