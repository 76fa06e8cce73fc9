#pragma once
// The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes of
// JSON, then the raw little-endian tensor data. The JSON maps each tensor name to
//   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// with offsets relative to the start of the data, and may hold "__metadata__", a map of
// strings to strings. The data must be covered exactly: no overlaps, no holes.
// Reading validates everything before it touches the data, so a hostile file is an
// ember::Error naming the file and the problem, never a crash or an over-read.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ember/tensor/ordered_dict.h"
#include "ember/tensor/tensor.h"

namespace ember::io {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in the order of the JSON header
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data section starts in the file (8 + N)
};

// Parses and validates the header of a whole safetensors file held in memory. `source`
// names the file in error messages. Depends on nothing but the JSON parser (the fuzz target).
SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& source);

struct SafetensorsContents {
  OrderedDict<Tensor> tensors{"tensor"};
  std::map<std::string, std::string> metadata;
};

// Parses a whole file held in memory into CPU tensors.
SafetensorsContents parse_safetensors(const uint8_t* data, size_t size, const std::string& source);
SafetensorsContents read_safetensors(const std::string& path);
// Writes tensors (any device, any layout; copied to contiguous CPU memory) in order, through
// write_file_atomically: a crash never leaves half a file.
void write_safetensors(const std::string& path, const OrderedDict<Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes the pieces, in order, as the file `path`: to `path`.tmp, fsynced, renamed into place,
// the directory fsynced (Note [Durable writes]). On any failure the temporary file is removed,
// `path` is left as it was, and an ember::Error names `what`, the file and the system's reason.
void write_file_atomically(const std::string& path, const std::vector<std::pair<const void*, size_t>>& pieces,
                           const char* what);
// Checks, before a long run, that a later write_file_atomically(path) can create its file: the
// folder exists and is writable, and `path` is not a directory. Throws an ember::Error if not.
void check_writable(const std::string& path, const char* what);

// "F32" for kFloat32, and back; the safetensors names of ember's dtypes.
const char* safetensors_dtype_name(DType dtype);

}  // namespace ember::io
