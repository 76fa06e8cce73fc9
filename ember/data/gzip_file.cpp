#include "ember/data/gzip_file.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include <vector>

#include "ember/tensor/error.h"

namespace ember::data {

void check_regular_file(const std::string& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(detail::concat(what, ": cannot open '", path, "': ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(detail::concat(what, ": '", path, "' is a directory, not a file"));
  if (!S_ISREG(st.st_mode))
    throw Error(detail::concat(what, ": '", path, "' is not a regular file (a FIFO, socket or device)"));
}

std::string read_gzip_or_plain(const std::string& path, size_t limit, const char* what) {
  check_regular_file(path, what);
  gzFile f = gzopen(path.c_str(), "rb");
  EMBER_CHECK(f != nullptr, what, ": cannot open '", path, "'");
  gzbuffer(f, 1 << 20);  // zlib's default 8 KiB input buffer makes reading MNIST 3x slower
  std::string bytes;
  std::vector<char> chunk(size_t{1} << 20);
  for (;;) {
    const int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    int err = Z_OK;
    const char* msg = n <= 0 ? gzerror(f, &err) : "";
    // n == 0 is the end, or a truncated stream (zlib reports that as Z_BUF_ERROR).
    if (n < 0 || err != Z_OK) {
      const std::string message = msg;
      gzclose(f);
      throw Error(detail::concat(what, " '", path, "': ", message, " (corrupt or truncated gzip data)"));
    }
    if (n == 0) break;
    if (bytes.size() + static_cast<size_t>(n) > limit) {
      gzclose(f);
      throw Error(detail::concat(what, " '", path, "': more than ", limit, " bytes after decompression"));
    }
    bytes.append(chunk.data(), static_cast<size_t>(n));
  }
  gzclose(f);
  return bytes;
}

}  // namespace ember::data
