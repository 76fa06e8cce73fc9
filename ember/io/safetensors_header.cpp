// The safetensors header parser: JSON (nlohmann) plus every check of the format, on bytes in
// memory. Kept apart from tensor creation so that the fuzz target (fuzz/) links only this.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "ember/io/safetensors.h"
#include "ember/tensor/error.h"

namespace ember::io {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation
constexpr int kMaxJsonDepth = 3;                  // root, tensor entry, shape / offsets

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {{"BOOL", kBool},     {"U8", kUInt8},    {"I8", kInt8},
                                 {"I32", kInt32},     {"I64", kInt64},   {"F16", kFloat16},
                                 {"BF16", kBFloat16}, {"F32", kFloat32}, {"F64", kFloat64}};
// Valid safetensors dtypes that ember has no tensor type for.
constexpr const char* kUnsupported[] = {"I16",     "U16", "U32",     "U64",     "F8_E4M3", "F8_E5M2",
                                        "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A JSON value that must be an unsigned integer.
uint64_t unsigned_value(const nlohmann::ordered_json& v, const std::string& source, const std::string& what) {
  EMBER_CHECK(v.is_number_unsigned(), "safetensors '", source, "': ", what, " must be a non-negative integer, got ",
              v.dump());
  return v.get<uint64_t>();
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  throw Error(detail::concat("safetensors: dtype ", dtype, " has no safetensors name"));
}

SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& source) {
  EMBER_CHECK(data != nullptr || size == 0, "safetensors '", source, "': no data");
  // PyTorch's own formats, named rather than misread: torch.save / torch::save write a zip
  // archive (a pickle and the raw storages; TorchScript files are zips too), older ones a bare
  // pickle (protocol 2, opcode 0x80).
  const char* convert =
      "; ember reads safetensors. Convert it with PyTorch and the safetensors package: "
      "safetensors.torch.save_file(torch.load(path), 'file.safetensors') for a dict of tensors "
      "(model.state_dict() for a module), or save_file({'tensor': t}, ...) for one tensor";
  EMBER_CHECK(!(size >= 4 && data[0] == 'P' && data[1] == 'K' && data[2] == 3 && data[3] == 4), "safetensors '", source,
              "': this is a zip archive, the format of PyTorch's torch.save and LibTorch's torch::save (.pt)", convert);
  EMBER_CHECK(!(size >= 2 && data[0] == 0x80 && data[1] >= 2 && data[1] <= 5), "safetensors '", source,
              "': this is a Python pickle, the legacy format of PyTorch's torch.save", convert);
  EMBER_CHECK(size >= 8, "safetensors '", source, "': the file is ", size,
              " bytes, shorter than the 8-byte header length");
  const uint64_t header_len = read_u64_le(data);
  EMBER_CHECK(header_len <= size - 8, "safetensors '", source, "': the header length ", header_len,
              " is larger than the file (", size - 8, " bytes after the length)");
  EMBER_CHECK(header_len <= kMaxHeaderBytes, "safetensors '", source, "': the header length ", header_len,
              " exceeds the ", kMaxHeaderBytes, "-byte limit");
  EMBER_CHECK(header_len >= 2 && data[8] == '{', "safetensors '", source,
              "': the header does not start with a JSON object");

  // Parse (keeping the file's order of entries), refusing duplicate names and nesting deeper than the format has.
  std::set<std::string> names;
  std::string duplicate;
  bool too_deep = false;
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(
        data + 8, data + 8 + header_len,
        [&](int depth, nlohmann::ordered_json::parse_event_t event, nlohmann::ordered_json& parsed) {
          if (depth > kMaxJsonDepth) too_deep = true;
          if (event == nlohmann::ordered_json::parse_event_t::key && depth == 1 &&
              !names.insert(parsed.get<std::string>()).second)
            duplicate = parsed.get<std::string>();
          return !too_deep;
        });
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::concat("safetensors '", source, "': the header is not valid JSON: ", e.what()));
  }
  EMBER_CHECK(!too_deep, "safetensors '", source, "': the header nests deeper than the format allows");
  EMBER_CHECK(duplicate.empty(), "safetensors '", source, "': the tensor name '", duplicate, "' appears twice");
  EMBER_CHECK(header.is_object(), "safetensors '", source, "': the header is not a JSON object");

  SafetensorsHeader out;
  out.data_offset = 8 + header_len;
  const uint64_t data_size = size - out.data_offset;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      EMBER_CHECK(value.is_object(), "safetensors '", source, "': __metadata__ must be an object of strings");
      for (const auto& [k, v] : value.items()) {
        EMBER_CHECK(v.is_string(), "safetensors '", source, "': __metadata__ entry '", k, "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    EMBER_CHECK(value.is_object(), "safetensors '", source, "': ", where, " is not a JSON object");
    EMBER_CHECK(value.contains("dtype") && value.contains("shape") && value.contains("data_offsets"), "safetensors '",
                source, "': ", where, " needs dtype, shape and data_offsets");
    const auto& dtype = value["dtype"];
    EMBER_CHECK(dtype.is_string(), "safetensors '", source, "': ", where, " has a dtype that is not a string");
    const std::string dtype_str = dtype.get<std::string>();
    SafetensorsEntry e;
    e.name = name;
    const auto* found =
        std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const DTypeName& d) { return dtype_str == d.name; });
    if (found == std::end(kDTypes)) {
      const bool known =
          std::any_of(std::begin(kUnsupported), std::end(kUnsupported), [&](const char* n) { return dtype_str == n; });
      throw Error(detail::concat(
          "safetensors '", source, "': ", where, " has ",
          known ? "dtype '" + dtype_str + "', which ember does not support" : "an unknown dtype '" + dtype_str + "'"));
    }
    e.dtype = found->dtype;

    const auto& shape = value["shape"];
    EMBER_CHECK(shape.is_array(), "safetensors '", source, "': ", where, " has a shape that is not an array");
    EMBER_CHECK(shape.size() <= 64, "safetensors '", source, "': ", where, " has ", shape.size(), " dimensions");
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : shape) {
      const uint64_t n = unsigned_value(d, source, where + " shape entry");
      EMBER_CHECK(n <= static_cast<uint64_t>(INT64_MAX), "safetensors '", source, "': ", where, " has dimension ", n);
      e.shape.push_back(static_cast<int64_t>(n));
      if (n != 0 && numel > UINT64_MAX / n) overflow = true;
      numel *= n;
    }
    const uint64_t elem = element_size(e.dtype);
    EMBER_CHECK(!overflow && numel <= UINT64_MAX / elem, "safetensors '", source, "': ", where, " with shape ",
                shape.dump(), " is too large");
    const auto& offsets = value["data_offsets"];
    EMBER_CHECK(offsets.is_array() && offsets.size() == 2, "safetensors '", source, "': ", where,
                " needs data_offsets [begin, end]");
    e.begin = unsigned_value(offsets[0], source, where + " data_offsets");
    e.end = unsigned_value(offsets[1], source, where + " data_offsets");
    EMBER_CHECK(e.begin <= e.end && e.end <= data_size, "safetensors '", source, "': ", where, " has data_offsets [",
                e.begin, ", ", e.end, "] outside the ", data_size, "-byte data section");
    EMBER_CHECK(e.end - e.begin == numel * elem, "safetensors '", source, "': ", where, " with shape ", shape.dump(),
                " and dtype ", dtype_str, " needs ", numel * elem, " bytes, but its data_offsets span ",
                e.end - e.begin);
    out.entries.push_back(std::move(e));
  }

  // The entries must tile the data section: sorted by offset, each starts where the last ended.
  std::vector<const SafetensorsEntry*> sorted;
  for (const auto& e : out.entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  for (const auto* e : sorted) {
    EMBER_CHECK(e->begin >= covered, "safetensors '", source, "': tensor '", e->name, "' (bytes ", e->begin, "..",
                e->end, ") overlaps the tensor before it");
    EMBER_CHECK(e->begin == covered, "safetensors '", source, "': bytes ", covered, "..", e->begin,
                " of the data section belong to no tensor");
    covered = e->end;
  }
  EMBER_CHECK(covered == data_size, "safetensors '", source, "': bytes ", covered, "..", data_size,
              " of the data section belong to no tensor");
  return out;
}

}  // namespace ember::io
