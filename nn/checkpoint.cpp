// Safetensors reading and writing: see checkpoint.h. The JSON header needs
// only a small reader (objects, arrays, strings, integers), written here.
#include "checkpoint.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

#include "../core/autograd.h"
#include "../core/internal.h"

namespace ember::nn {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so is ember's memory");

namespace {

// ---- a small JSON reader ------------------------------------------------------------------

struct Json {
    enum class Kind { Object, Array, String, Integer, Other } kind = Kind::Other;
    std::vector<std::string> keys; // Object: keys and values, in file order
    std::vector<Json> values;
    std::vector<Json> items; // Array
    std::string text;        // String
    int64_t integer = 0;     // Integer
    // The value of `key` in an Object, or null.
    const Json* find(const std::string& key) const {
        for (size_t i = 0; i < keys.size(); ++i)
            if (keys[i] == key) return &values[i];
        return nullptr;
    }
};

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
    JsonReader(const std::string& text, const std::string& where) : s_(text), where_(where) {}

    Json document() {
        Json value = parse(0);
        skip_space();
        if (pos_ != s_.size()) error("unexpected text after the header object");
        return value;
    }

private:
    [[noreturn]] void error(const std::string& what) const {
        fail<CheckpointError>("load_safetensors", where_, ": invalid header JSON at byte ", pos_, ": ", what);
    }
    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
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
        if (integral && int_digits <= 18) { // fits int64 whatever the digits
            v.kind = Json::Kind::Integer;
            v.integer = std::stoll(s_.substr(start, pos_ - start));
        }
        return v; // fractions and huge numbers are never valid in a safetensors header
    }

    unsigned hex4() {
        if (pos_ + 4 > s_.size()) error("short \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
            char h = s_[pos_++];
            if (!std::isxdigit(static_cast<unsigned char>(h))) error("bad \\u escape");
            code = code * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
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
    size_t pos_ = 0;
};

// ---- dtypes and JSON writing --------------------------------------------------------------

const char* safetensors_dtype(DType d) {
    switch (d) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
    }
    return "?";
}

bool dtype_from_name(const std::string& name, DType& out) {
    for (DType d : {DType::Float32, DType::Float64, DType::Int64, DType::Bool})
        if (name == safetensors_dtype(d)) {
            out = d;
            return true;
        }
    return false;
}

// A JSON string literal, escaped as Python's json.dumps(..., ensure_ascii=False).
std::string quoted(const std::string& s) {
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

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
    fail<CheckpointError>("load_safetensors", path, ": ", what);
}

} // namespace

// ---- saving ----------------------------------------------------------------------------------

void save_safetensors(const StateDict& tensors, const std::string& path, const Metadata& metadata) {
    // The header: metadata first, then each tensor with its byte range in
    // the data section, which holds the tensors back to back in this order.
    std::vector<Tensor> data;
    std::string header = "{";
    if (!metadata.empty()) {
        header += "\"__metadata__\":{";
        for (const auto& [k, v] : metadata) {
            if (header.back() != '{') header += ',';
            header += quoted(k);
            header += ':';
            header += quoted(v);
        }
        header += '}';
    }
    uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        if (name == "__metadata__") fail<CheckpointError>("save_safetensors", "\"__metadata__\" is reserved");
        if (!t.defined()) fail<CheckpointError>("save_safetensors", "tensor \"", name, "\" is undefined");
        Tensor c = internal::contiguous_data(t.detach());
        uint64_t nbytes = static_cast<uint64_t>(c.numel()) * element_size(c.dtype());
        std::string shape;
        for (int64_t s : c.shape()) {
            if (!shape.empty()) shape += ',';
            shape += std::to_string(s);
        }
        if (header.size() > 1) header += ',';
        header += quoted(name);
        header += ":{\"dtype\":\"";
        header += safetensors_dtype(c.dtype());
        header += "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(offset) + ',' +
                  std::to_string(offset + nbytes) + "]}";
        offset += nbytes;
        data.push_back(c);
    }
    header += "}";
    // Pad with spaces so that the data starts at a multiple of 8.
    while ((8 + header.size()) % 8 != 0) header += ' ';

    // Write everything to a new temporary file beside `path` (a unique name:
    // no other file is touched, and two saves cannot mix), flush it to disk,
    // and only then rename it over `path`: the old file stays intact until
    // the new one is whole.
    std::string tmp = path + ".tmp.XXXXXX";
    int fd = ::mkstemp(tmp.data());
    if (fd < 0) fail<CheckpointError>("save_safetensors", "cannot create a temporary file beside ", path, ": ",
                                      std::strerror(errno));
    ::fchmod(fd, 0644); // mkstemp's 0600 would hide the checkpoint from other users
    auto write_all = [&](const void* bytes, size_t n) {
        const char* p = static_cast<const char*>(bytes);
        while (n > 0) {
            ssize_t w = ::write(fd, p, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return false;
            p += w;
            n -= static_cast<size_t>(w);
        }
        return true;
    };
    uint64_t n = header.size();
    bool ok = write_all(&n, 8) && write_all(header.data(), header.size());
    for (const Tensor& t : data)
        ok = ok && write_all(static_cast<const char*>(t.storage()->data()) + t.storage_offset() * element_size(t.dtype()),
                             static_cast<size_t>(t.numel()) * element_size(t.dtype()));
    ok = ok && ::fsync(fd) == 0;
    int saved_errno = errno;
    ok = ::close(fd) == 0 && ok;
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        if (ok) saved_errno = errno;
        ::unlink(tmp.c_str());
        fail<CheckpointError>("save_safetensors", "cannot write ", path, ": ", std::strerror(saved_errno),
                              " (the previous file, if any, is unchanged)");
    }
}

// ---- loading ---------------------------------------------------------------------------------

// The whole file, or a CheckpointError (a directory, an unreadable file,
// one too large for memory).
std::string read_file(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        fail<CheckpointError>("load_safetensors", "cannot open ", path, ": not a regular file");
    std::ifstream file(path, std::ios::binary);
    if (!file) fail<CheckpointError>("load_safetensors", "cannot open ", path, ": ", std::strerror(errno));
    try {
        return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    } catch (const std::exception& e) {
        fail<CheckpointError>("load_safetensors", "cannot read ", path, ": ", e.what());
    }
}

StateDict load_safetensors(const std::string& path, Metadata* metadata) {
    const std::string bytes = read_file(path);
    auto bad = [&path](const std::string& what) { corrupt(path, what); };

    if (bytes.size() < 8) bad("truncated: " + std::to_string(bytes.size()) + " bytes, too short for a header length");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    if (n > bytes.size() - 8)
        bad("truncated: the header claims " + std::to_string(n) + " bytes but only " + std::to_string(bytes.size() - 8) +
            " follow");
    std::string header = bytes.substr(8, n);
    if (header.empty() || header[0] != '{') bad("the header does not start with '{': not a safetensors file");
    Json root = JsonReader(header, path).document();
    if (root.kind != Json::Kind::Object) bad("the header is not a JSON object");
    const uint64_t data_size = bytes.size() - 8 - n;
    const char* data = bytes.data() + 8 + n;

    struct Entry {
        std::string name;
        DType dtype;
        Shape shape;
        uint64_t begin, end;
    };
    std::vector<Entry> entries;
    Metadata meta;
    for (size_t i = 0; i < root.keys.size(); ++i) {
        const std::string& name = root.keys[i];
        const Json& value = root.values[i];
        if (name == "__metadata__") {
            if (value.kind != Json::Kind::Object) bad("__metadata__ is not an object");
            for (size_t m = 0; m < value.keys.size(); ++m) {
                if (value.values[m].kind != Json::Kind::String)
                    bad("__metadata__ value \"" + value.keys[m] + "\" is not a string");
                meta[value.keys[m]] = value.values[m].text;
            }
            continue;
        }
        if (value.kind != Json::Kind::Object) bad("tensor \"" + name + "\" is not described by an object");
        auto field = [&value, &name, &path](const char* key) -> const Json& {
            const Json* found = value.find(key);
            if (!found) corrupt(path, "tensor \"" + name + "\" has no \"" + key + "\"");
            return *found;
        };
        Entry e{name, DType::Float32, {}, 0, 0};
        const Json& dtype = field("dtype");
        if (dtype.kind != Json::Kind::String || !dtype_from_name(dtype.text, e.dtype))
            bad("tensor \"" + name + "\" has dtype " + (dtype.kind == Json::Kind::String ? dtype.text : "?") +
                ", which ember does not support (F32, F64, I64, BOOL)");
        const Json& shape = field("shape");
        if (shape.kind != Json::Kind::Array) bad("tensor \"" + name + "\" has no shape list");
        // The product of the non-zero sizes is bounded even when a size is 0:
        // the strides are products of sizes and must not overflow.
        uint64_t numel = 1, nonzero = 1;
        for (const Json& s : shape.items) {
            if (s.kind != Json::Kind::Integer || s.integer < 0) bad("tensor \"" + name + "\" has a bad size in its shape");
            e.shape.push_back(s.integer);
            if (s.integer == 0) {
                numel = 0;
                continue;
            }
            if (nonzero > (uint64_t{1} << 40) / static_cast<uint64_t>(s.integer))
                bad("tensor \"" + name + "\" is impossibly large");
            nonzero *= static_cast<uint64_t>(s.integer);
            numel *= static_cast<uint64_t>(s.integer);
        }
        const Json& offsets = field("data_offsets");
        if (offsets.kind != Json::Kind::Array || offsets.items.size() != 2 ||
            offsets.items[0].kind != Json::Kind::Integer || offsets.items[1].kind != Json::Kind::Integer ||
            offsets.items[0].integer < 0 || offsets.items[1].integer < offsets.items[0].integer)
            bad("tensor \"" + name + "\" has bad data_offsets");
        e.begin = static_cast<uint64_t>(offsets.items[0].integer);
        e.end = static_cast<uint64_t>(offsets.items[1].integer);
        if (e.end > data_size)
            bad("truncated: tensor \"" + name + "\" ends at byte " + std::to_string(e.end) + " of a " +
                std::to_string(data_size) + "-byte data section");
        if (e.end - e.begin != numel * element_size(e.dtype))
            bad("tensor \"" + name + "\" spans " + std::to_string(e.end - e.begin) + " bytes, but " +
                shape_str(e.shape) + " of " + dtype.text + " needs " + std::to_string(numel * element_size(e.dtype)));
        entries.push_back(e);
    }
    // The tensors must fill the data section exactly: no gaps, no overlaps,
    // nothing left over (what a truncated or spliced file would show).
    std::vector<const Entry*> by_offset;
    for (const Entry& e : entries) by_offset.push_back(&e);
    std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t expected = 0;
    for (const Entry* e : by_offset) {
        if (e->begin != expected) bad("tensor data has a gap or an overlap at byte " + std::to_string(expected));
        expected = e->end;
    }
    if (expected != data_size)
        bad(std::to_string(data_size - expected) + " bytes of data after the last tensor: not a valid file");

    StateDict out;
    for (const Entry& e : entries) {
        Tensor t = empty(e.shape, e.dtype);
        if (e.dtype == DType::Bool)
            for (uint64_t i = e.begin; i < e.end; ++i)
                if (data[i] != 0 && data[i] != 1) bad("tensor \"" + e.name + "\" holds a bool that is neither 0 nor 1");
        if (e.end > e.begin) std::memcpy(t.storage()->data(), data + e.begin, e.end - e.begin);
        out.insert(e.name, t);
    }
    if (metadata) *metadata = meta;
    return out;
}

void save(const Module& module, const std::string& path, const Metadata& metadata) {
    save_safetensors(module.state_dict(), path, metadata);
}

void load(Module& module, const std::string& path, Metadata* metadata) {
    // Both steps check everything before changing anything: a bad file or a
    // mismatched model leaves the module as it was.
    Metadata meta;
    StateDict dict = load_safetensors(path, &meta);
    module.load_state_dict(dict, /*strict=*/true);
    if (metadata) *metadata = meta;
}

} // namespace ember::nn
