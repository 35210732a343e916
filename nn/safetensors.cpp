// Safetensors reading and writing: see safetensors.h. The JSON of the header
// is read and quoted by nn/json.h. Tests: tests/test_safetensors.cpp.
#include "nn/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <unistd.h>

#include "core/autograd/autograd.h"
#include "core/tensor/internal.h"
#include "core/tensor/platform.h"
#include "nn/json.h"

namespace ember::nn {

using internal::Json;
using internal::json_quoted;
using internal::parse_json;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so is ember's memory");

namespace {

// ---- dtypes ------------------------------------------------------------------------------

const char* safetensors_dtype(DType d) {
    switch (d) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
    }
    return "?";
}

// A dtype a file may hold: its name, its size in bytes, and the dtype ember
// reads it as. The half-precision floats and the narrower integers widen
// exactly: every float16 and bfloat16 value is a float32, every 8- to
// 32-bit integer an int64 (U64 could overflow and is refused).
struct FileDType {
    const char* name;
    uint64_t size;
    DType as;
};
constexpr FileDType kFileDTypes[] = {
    {"F32", 4, DType::Float32}, {"F64", 8, DType::Float64},  {"I64", 8, DType::Int64}, {"BOOL", 1, DType::Bool},
    {"F16", 2, DType::Float32}, {"BF16", 2, DType::Float32}, {"I32", 4, DType::Int64}, {"I16", 2, DType::Int64},
    {"I8", 1, DType::Int64},    {"U32", 4, DType::Int64},    {"U16", 2, DType::Int64}, {"U8", 1, DType::Int64},
};

const FileDType* file_dtype(const std::string& name) {
    for (const FileDType& d : kFileDTypes)
        if (name == d.name) return &d;
    return nullptr;
}

// IEEE binary16 -> float32, exactly (subnormals, infinities and NaN included).
float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
    if (exponent == 0) { // zero or subnormal: mantissa x 2^-24
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13)); // inf, NaN
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));        // rebias 15 -> 127
}

// `n` elements of file dtype `from`, little-endian at `bytes`, into `into`
// (of from.as): the dtype is looked at once, then each element converted.
void widen(const FileDType& from, const char* bytes, uint64_t n, void* into) {
    auto each = [&]<typename T, typename Out>(T, Out* out, auto convert) {
        for (uint64_t i = 0; i < n; ++i) {
            T v;
            std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
            out[i] = convert(v);
        }
    };
    float* f = static_cast<float*>(into);
    int64_t* k = static_cast<int64_t*>(into);
    auto widened = [](auto v) { return static_cast<int64_t>(v); };
    const std::string name = from.name;
    if (name == "F16") each(uint16_t{}, f, half_to_float);
    else if (name == "BF16") each(uint16_t{}, f, [](uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); });
    else if (name == "I32") each(int32_t{}, k, widened);
    else if (name == "I16") each(int16_t{}, k, widened);
    else if (name == "I8") each(int8_t{}, k, widened);
    else if (name == "U32") each(uint32_t{}, k, widened);
    else if (name == "U16") each(uint16_t{}, k, widened);
    else each(uint8_t{}, k, widened); // U8
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
    fail<SafetensorsError>("load_safetensors", path, ": ", what);
}

} // namespace

} // namespace ember::nn

namespace ember::internal {

void write_file_atomically(const std::string& path, const std::vector<Bytes>& pieces, const char* op) {
    // The platform's writer (core/tensor/platform.h): a new temporary file
    // beside `path` (a unique name: no other file is touched, and two saves
    // cannot mix), flushed to disk, and only then renamed over `path`: the
    // old file stays intact until the new one is whole.
    std::vector<std::string_view> bytes;
    for (const Bytes& piece : pieces) bytes.emplace_back(static_cast<const char*>(piece.data), piece.size);
    const std::string why = write_file_whole(path, bytes);
    if (!why.empty()) fail<nn::SafetensorsError>(op, "cannot write ", path, ": ", why);
}

} // namespace ember::internal

namespace ember::nn {

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
            header += json_quoted(k);
            header += ':';
            header += json_quoted(v);
        }
        header += '}';
    }
    uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        if (name == "__metadata__") fail<SafetensorsError>("save_safetensors", "\"__metadata__\" is reserved");
        if (!t.defined()) fail<SafetensorsError>("save_safetensors", "tensor \"", name, "\" is undefined");
        Tensor c = internal::contiguous_data(t.detach());
        uint64_t nbytes = static_cast<uint64_t>(c.numel()) * element_size(c.dtype());
        std::string shape;
        for (int64_t s : c.shape()) {
            if (!shape.empty()) shape += ',';
            shape += std::to_string(s);
        }
        if (header.size() > 1) header += ',';
        header += json_quoted(name);
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

    std::vector<internal::Bytes> pieces;
    uint64_t n = header.size();
    pieces.push_back({&n, 8});
    pieces.push_back({header.data(), header.size()});
    for (const Tensor& t : data)
        pieces.push_back({static_cast<const char*>(t.storage()->data()) + t.storage_offset() * element_size(t.dtype()),
                          static_cast<size_t>(t.numel()) * element_size(t.dtype())});
    internal::write_file_atomically(path, pieces, "save_safetensors");
}

// ---- loading ---------------------------------------------------------------------------------

// The file `path`, open for reading, and its size: the size comes from the
// open file itself, so a save renaming a new file over `path` meanwhile
// cannot mix two files. A SafetensorsError says why it cannot be read:
// missing or unreadable (the system's reason), a directory, or a special
// file (a FIFO or /dev/zero would never end; O_NONBLOCK opens a FIFO
// without waiting for a writer).
struct OpenFile {
    int fd = -1;
    uint64_t size = 0;
    OpenFile() = default;
    OpenFile(const OpenFile&) = delete;
    OpenFile& operator=(const OpenFile&) = delete;
    ~OpenFile() {
        if (fd >= 0) ::close(fd);
    }
};

void open_regular_file(const std::string& path, OpenFile& file) {
    file.fd = internal::open_for_reading(path);
    if (file.fd < 0) {
        const int error = errno;
        // Windows cannot open a folder as a file at all: say what it is, as below.
        std::error_code ignored;
        if (std::filesystem::is_directory(path, ignored))
            fail<SafetensorsError>("load_safetensors", "cannot open ", path, ": it is a directory");
        fail<SafetensorsError>("load_safetensors", "cannot open ", path, ": ", std::strerror(error));
    }
    internal::FileInfo info;
    if (!internal::file_info(file.fd, info))
        fail<SafetensorsError>("load_safetensors", "cannot open ", path, ": ", std::strerror(errno));
    if (info.directory) fail<SafetensorsError>("load_safetensors", "cannot open ", path, ": it is a directory");
    if (!info.regular)
        fail<SafetensorsError>("load_safetensors", "cannot open ", path,
                               ": not a regular file (a device, a pipe or a socket)");
    file.size = info.size;
}

// Reads exactly `n` bytes of `file` into `into`, or throws.
void read_exact(const OpenFile& file, char* into, uint64_t n, const std::string& path) {
    while (n > 0) {
        const ssize_t got = ::read(file.fd, into, static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30)));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) fail<SafetensorsError>("load_safetensors", "cannot read ", path, ": ", std::strerror(errno));
        if (got == 0) fail<SafetensorsError>("load_safetensors", "cannot read ", path, ": it ended early");
        into += got;
        n -= static_cast<uint64_t>(got);
    }
}

// `n` bytes of `file` from where it stands, or a SafetensorsError.
std::string read_bytes(const OpenFile& file, uint64_t n, const std::string& path) {
    std::string bytes;
    try {
        bytes.resize(n);
    } catch (const std::exception& e) {
        fail<SafetensorsError>("load_safetensors", "cannot read ", path, ": ", e.what());
    }
    read_exact(file, bytes.data(), n, path);
    return bytes;
}

// The largest header ember reads: the format's own limit (100 MB of JSON).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

StateDict load_safetensors(const std::string& path, Metadata* metadata) {
    // The header is read and checked first, against the file's size, so a
    // file that is not safetensors (8 GB of zeros) is refused at once.
    OpenFile file;
    open_regular_file(path, file);
    const uint64_t file_size = file.size;
    auto bad = [&path](const std::string& what) { corrupt(path, what); };

    if (file_size < 8) bad("truncated: " + std::to_string(file_size) + " bytes, too short for a header length");
    uint64_t n = 0;
    const std::string length = read_bytes(file, 8, path);
    std::memcpy(&n, length.data(), 8);
    if (n > file_size - 8)
        bad("truncated: the header claims " + std::to_string(n) + " bytes but only " + std::to_string(file_size - 8) +
            " follow");
    if (n > kMaxHeaderBytes)
        bad("the header claims " + std::to_string(n) + " bytes, more than the format's limit of 100 MB");
    const std::string header = read_bytes(file, n, path);
    if (header.empty() || header[0] != '{') bad("the header does not start with '{': not a safetensors file");
    Json root = parse_json(header, path);
    if (root.kind != Json::Kind::Object) bad("the header is not a JSON object");
    const uint64_t data_size = file_size - 8 - n;

    struct Entry {
        std::string name;
        const FileDType* dtype;
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
        Entry e{name, nullptr, {}, 0, 0};
        const Json& dtype = field("dtype");
        if (dtype.kind == Json::Kind::String) e.dtype = file_dtype(dtype.text);
        if (!e.dtype)
            bad("tensor \"" + name + "\" has dtype " + (dtype.kind == Json::Kind::String ? dtype.text : "?") +
                ", which ember does not read (F32, F64, F16, BF16, I64, I32, I16, I8, U32, U16, U8, BOOL)");
        const Json& shape = field("shape");
        if (shape.kind != Json::Kind::Array) bad("tensor \"" + name + "\" has no shape list");
        // The product of the non-zero sizes is bounded even when a size is 0:
        // the strides are products of sizes and must not overflow.
        uint64_t numel = 1, nonzero = 1;
        for (const Json& s : shape.items) {
            if (s.kind != Json::Kind::Integer || s.integer < 0)
                bad("tensor \"" + name + "\" has a bad size in its shape");
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
        if (e.end - e.begin != numel * e.dtype->size)
            bad("tensor \"" + name + "\" spans " + std::to_string(e.end - e.begin) + " bytes, but " +
                shape_str(e.shape) + " of " + dtype.text + " needs " + std::to_string(numel * e.dtype->size));
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

    // The data, read straight into each tensor, in file order: the tensors
    // fill the data section back to back (checked above).
    std::vector<Tensor> tensors(entries.size());
    for (const Entry* e : by_offset) {
        Tensor t = empty(e->shape, e->dtype->as);
        char* into = static_cast<char*>(t.storage()->data());
        const uint64_t n = e->end - e->begin;
        if (e->dtype->size != element_size(e->dtype->as)) { // F16, BF16, a narrow integer: widened
            const std::string bytes = read_bytes(file, n, path);
            widen(*e->dtype, bytes.data(), n / e->dtype->size, into);
        } else {
            read_exact(file, into, n, path);
        }
        if (e->dtype->as == DType::Bool)
            for (uint64_t i = 0; i < n; ++i)
                if (into[i] != 0 && into[i] != 1)
                    bad("tensor \"" + e->name + "\" holds a bool that is neither 0 nor 1");
        tensors[static_cast<size_t>(e - entries.data())] = t;
    }
    StateDict out; // in the header's order
    for (size_t i = 0; i < entries.size(); ++i) out.insert(entries[i].name, tensors[i]);
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
