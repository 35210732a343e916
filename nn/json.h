// The JSON of a safetensors header: a small reader (objects, arrays,
// strings, integers, other numbers; true, false and null are kept as Other
// with their word in `text`) and the quoting of strings as Python's
// json.dumps writes them. Private to nn/: safetensors.cpp, gpt2_tokenizer.cpp
// (GPT-2's encoder.json) and pretrained.cpp (config.json); its errors are
// nn::SafetensorsError. Tests: tests/test_safetensors.cpp (valid and corrupt
// headers), tests/test_pretrained.cpp (numbers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::internal {

struct Json {
    enum class Kind { Object, Array, String, Integer, Number, Other } kind = Kind::Other;
    std::vector<std::string> keys; // Object: keys and values, in file order
    std::vector<Json> values;
    std::vector<Json> items; // Array
    std::string text;        // String; Other: "true", "false" or "null"
    int64_t integer = 0;     // Integer
    double number = 0;       // Integer and Number: the value (a Number is any other JSON number)
    // The value of `key` in an Object, or null.
    const Json* find(const std::string& key) const {
        for (size_t i = 0; i < keys.size(); ++i)
            if (keys[i] == key) return &values[i];
        return nullptr;
    }
};

// The JSON document `text` (a safetensors header read from `where`), at most
// 32 levels deep. Anything else (a syntax error, a duplicate key, trailing
// text) throws nn::SafetensorsError naming `op`, `where` and the byte offset.
Json parse_json(const std::string& text, const std::string& where, const char* op = "load_safetensors");

// A JSON string literal, escaped as Python's json.dumps(..., ensure_ascii=False).
std::string json_quoted(const std::string& s);

} // namespace ember::internal
