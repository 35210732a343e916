// The safetensors header's JSON: see json.h. Tests: tests/test_safetensors.cpp.
#include "nn/json.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "nn/safetensors.h"

namespace ember::internal {

namespace {

// Appends the UTF-8 encoding of a code point.
void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
        out += static_cast<char>(code);
    } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    }
}

class JsonReader {
public:
    JsonReader(const std::string& text, const std::string& where, const char* op) : s_(text), where_(where), op_(op) {}

    Json document() {
        Json value = parse(0);
        skip_space();
        if (pos_ != s_.size()) error("unexpected text after the header object");
        return value;
    }

private:
    [[noreturn]] void error(const std::string& what) const {
        fail<nn::SafetensorsError>(op_, where_, ": invalid JSON at byte ", pos_, ": ", what);
    }
    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
            ++pos_;
    }
    char peek() {
        skip_space();
        if (pos_ >= s_.size()) error("unexpected end");
        return s_[pos_];
    }
    void expect(char c) {
        if (peek() != c) error(std::string("expected '") + c + "'");
        ++pos_;
    }

    Json parse(int depth) {
        if (depth > 32) error("nested too deeply");
        char c = peek();
        Json v;
        if (c == '{') {
            v.kind = Json::Kind::Object;
            ++pos_;
            if (peek() == '}') {
                ++pos_;
                return v;
            }
            std::set<std::string> seen;
            while (true) {
                if (peek() != '"') error("expected a key");
                std::string key = string();
                if (!seen.insert(key).second) error("duplicate key \"" + key + "\"");
                expect(':');
                v.keys.push_back(key);
                v.values.push_back(parse(depth + 1));
                if (peek() == ',') {
                    ++pos_;
                    continue;
                }
                expect('}');
                return v;
            }
        }
        if (c == '[') {
            v.kind = Json::Kind::Array;
            ++pos_;
            if (peek() == ']') {
                ++pos_;
                return v;
            }
            while (true) {
                v.items.push_back(parse(depth + 1));
                if (peek() == ',') {
                    ++pos_;
                    continue;
                }
                expect(']');
                return v;
            }
        }
        if (c == '"') {
            v.kind = Json::Kind::String;
            v.text = string();
            return v;
        }
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        for (const char* word : {"true", "false", "null"})
            if (s_.compare(pos_, std::strlen(word), word) == 0) {
                pos_ += std::strlen(word);
                v.text = word;
                return v;
            }
        error("unexpected character");
    }

    // JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    Json number() {
        auto digits = [&] {
            size_t from = pos_;
            while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
            return pos_ - from;
        };
        size_t start = pos_;
        if (s_[pos_] == '-') ++pos_;
        size_t int_start = pos_;
        size_t int_digits = digits();
        if (int_digits == 0) error("bad number");
        if (int_digits > 1 && s_[int_start] == '0') error("a number with a leading zero");
        bool integral = true;
        if (pos_ < s_.size() && s_[pos_] == '.') {
            ++pos_;
            if (digits() == 0) error("bad number");
            integral = false;
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            ++pos_;
            if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
            if (digits() == 0) error("bad number");
            integral = false;
        }
        Json v;
        const std::string literal = s_.substr(start, pos_ - start);
        if (integral && int_digits <= 18) { // fits int64 whatever the digits
            v.kind = Json::Kind::Integer;
            v.integer = std::stoll(literal);
            v.number = static_cast<double>(v.integer);
        } else { // fractions and huge numbers: never valid in a safetensors header, read for config.json
            v.kind = Json::Kind::Number;
            // from_chars reads as the C locale does, whatever the program's locale
            const auto [end, error] = std::from_chars(literal.data(), literal.data() + literal.size(), v.number);
            if (error == std::errc::result_out_of_range) v.number = literal[0] == '-' ? -INFINITY : INFINITY;
        }
        return v;
    }

    unsigned hex4() {
        if (pos_ + 4 > s_.size()) error("short \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
            char h = s_[pos_++];
            if (!std::isxdigit(static_cast<unsigned char>(h))) error("bad \\u escape");
            code = code * 16 +
                   static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        return code;
    }

    std::string string() {
        ++pos_; // the opening quote
        std::string out;
        while (true) {
            if (pos_ >= s_.size()) error("unterminated string");
            char c = s_[pos_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) error("control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) error("unterminated escape");
            char e = s_[pos_++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned code = hex4();
                // A character beyond U+FFFF comes as a surrogate pair: \\uD83D\\uDE00.
                if (code >= 0xD800 && code < 0xDC00) {
                    if (s_.compare(pos_, 2, "\\u") != 0) error("lone high surrogate");
                    pos_ += 2;
                    unsigned low = hex4();
                    if (low < 0xDC00 || low >= 0xE000) error("bad low surrogate");
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                } else if (code >= 0xDC00 && code < 0xE000) {
                    error("lone low surrogate");
                }
                append_utf8(out, code);
                break;
            }
            default: error("unknown escape");
            }
        }
    }

    const std::string& s_;
    std::string where_;
    const char* op_;
    size_t pos_ = 0;
};

} // namespace

Json parse_json(const std::string& text, const std::string& where, const char* op) {
    return JsonReader(text, where, op).document();
}

// A JSON string literal, escaped as Python's json.dumps(..., ensure_ascii=False).
std::string json_quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                out += buf;
            } else {
                out += c;
            }
        }
    }
    return out + "\"";
}

} // namespace ember::internal
