// Tensors in files of the safetensors format, readable by PyTorch-side tools and
// written so that an interrupted save never destroys the previous file.
// Loading checks everything before it returns, and load(module, ...) checks
// every key and shape before copying anything. docs/safetensors.md; tests:
// tests/test_safetensors.cpp.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/module.h"

// A safetensors file is: 8 bytes, little-endian, the header's length N; N
// bytes of JSON naming each tensor's dtype, shape and byte range, plus an
// optional "__metadata__" object of strings; then the raw little-endian data.
// ember writes float32, float64, int64 and bool (F32, F64, I64, BOOL), in
// state_dict order, with the header padded by spaces to a multiple of 8.
// It also reads F16 and BF16 (as float32) and I32, I16, I8, U32, U16, U8 (as
// int64): each value exactly, as checkpoints saved in half precision or
// with uint8 mask buffers hold them. Loading checks lengths, offsets,
// dtypes, shapes, and that the data exactly fills the file.

namespace ember::nn {

// A file that cannot be read or written, or is not a valid safetensors file.
class SafetensorsError : public Error {
public:
    using Error::Error;
};

using Metadata = std::map<std::string, std::string>;

// Writes to a temporary file beside `path`, flushes it to disk, then renames it over `path`.
void save_safetensors(const StateDict& tensors, const std::string& path, const Metadata& metadata = {});
// Reads and validates a whole file; `metadata`, if given, receives "__metadata__".
StateDict load_safetensors(const std::string& path, Metadata* metadata = nullptr);

// A module's state_dict to a file, and back (strictly: the same keys and shapes).
void save(const Module& module, const std::string& path, const Metadata& metadata = {});
void load(Module& module, const std::string& path, Metadata* metadata = nullptr);

} // namespace ember::nn

namespace ember::internal {
// Bytes to write: a pointer and a length.
struct Bytes {
    const void* data;
    size_t size;
};
// Writes `pieces` one after another to a temporary file beside `path`,
// flushes it to disk and renames it over `path`; SafetensorsError naming
// `op` if any step fails (the previous file, if any, is then unchanged).
void write_file_atomically(const std::string& path, const std::vector<Bytes>& pieces, const char* op);
} // namespace ember::internal
