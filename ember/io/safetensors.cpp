#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ember/io/safetensors.h"
#include "ember/tensor/ops.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ember's safetensors reader and writer assume a little-endian host"
#endif

namespace ember::io {

SafetensorsContents parse_safetensors(const uint8_t* data, size_t size, const std::string& source) {
  const SafetensorsHeader header = parse_safetensors_header(data, size, source);
  SafetensorsContents out;
  out.metadata = header.metadata;
  for (const auto& e : header.entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + header.data_offset + e.begin, e.end - e.begin);
    out.tensors.insert(e.name, std::move(t));
  }
  return out;
}

SafetensorsContents read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EMBER_CHECK(in.good(), "safetensors: cannot open '", path, "' for reading");
  const std::streamoff size = in.tellg();
  EMBER_CHECK(size >= 0, "safetensors: cannot read the size of '", path, "'");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (size > 0) in.read(reinterpret_cast<char*>(bytes.data()), size);
  EMBER_CHECK(in.good() || in.eof(), "safetensors: reading '", path, "' failed");
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

void write_safetensors(const std::string& path, const OrderedDict<Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& item : tensors) {
    EMBER_CHECK(item.key() != "__metadata__", "safetensors '", path, "': '__metadata__' is not a valid tensor name");
    EMBER_CHECK(item.value().defined(), "safetensors '", path, "': tensor '", item.key(), "' is undefined");
    Tensor t = item.value().detach().to(Device(kCPU)).contiguous();
    header[item.key()] = {{"dtype", safetensors_dtype_name(t.dtype())},
                          {"shape", t.sizes()},
                          {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
    contiguous.push_back(std::move(t));
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    EMBER_CHECK(out.good(), "safetensors: cannot open '", tmp, "' for writing");
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(json.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(json.data(), static_cast<std::streamsize>(json.size()));
    for (const auto& t : contiguous)
      if (t.nbytes() > 0) out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    out.flush();
    EMBER_CHECK(out.good(), "safetensors: writing '", tmp, "' failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("safetensors: cannot move '" + tmp + "' to '" + path + "'");
  }
}

}  // namespace ember::io
