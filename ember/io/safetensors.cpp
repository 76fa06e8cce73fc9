#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ember/data/gzip_file.h"
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
  data::check_regular_file(path, "safetensors");  // a directory would size as 2^63 bytes
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
  std::vector<std::pair<const void*, size_t>> pieces;
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(json.size()) >> (8 * i));
  pieces.emplace_back(len, 8);
  pieces.emplace_back(json.data(), json.size());
  for (const auto& t : contiguous)
    if (t.nbytes() > 0) pieces.emplace_back(t.data_ptr(), t.nbytes());
  write_file_atomically(path, pieces, "safetensors");
}

namespace {

std::string directory_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Throws after removing the temporary file, so a failed save leaves nothing behind.
[[noreturn]] void fail_write(int fd, const std::string& tmp, const char* what, const char* step) {
  const int err = errno;
  if (fd >= 0) ::close(fd);
  ::unlink(tmp.c_str());
  throw Error(detail::concat(what, ": ", step, " '", tmp, "' failed: ", std::strerror(err),
                             " (the previous file, if any, is unchanged)"));
}

}  // namespace

// Note [Durable writes]: the bytes go to `path`.tmp, which is fsynced, renamed over `path`, and
// the directory fsynced, so that after a crash or power loss at any instant `path` holds either
// the old file or the new one, whole. Any failure (disk full, no permission) removes the
// temporary file and leaves `path` as it was.
void write_file_atomically(const std::string& path, const std::vector<std::pair<const void*, size_t>>& pieces,
                           const char* what) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw Error(detail::concat(what, ": cannot open '", tmp, "' for writing: ", std::strerror(err)));
  }
  for (const auto& [data, size] : pieces) {
    const char* p = static_cast<const char*>(data);
    for (size_t left = size; left > 0;) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail_write(fd, tmp, what, "writing");
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0) fail_write(fd, tmp, what, "flushing");
  if (::close(fd) != 0) fail_write(-1, tmp, what, "closing");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(detail::concat(what, ": cannot move '", tmp, "' to '", path, "': ", std::strerror(err)));
  }
  // The rename is durable once the directory entry is on disk.
  const int dir = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void check_writable(const std::string& path, const char* what) {
  std::error_code ec;
  EMBER_CHECK(!std::filesystem::is_directory(path, ec), what, ": '", path, "' is a directory; give a file name");
  const std::string dir = directory_of(path);
  EMBER_CHECK(std::filesystem::is_directory(dir, ec), what, ": the folder '", dir, "' of '", path, "' does not exist");
  // What a save does first: create the temporary file beside the target (then remove it).
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw Error(detail::concat(what, ": cannot write '", path, "' (creating '", tmp, "': ", std::strerror(err), ")"));
  }
  ::close(fd);
  ::unlink(tmp.c_str());
}

}  // namespace ember::io
