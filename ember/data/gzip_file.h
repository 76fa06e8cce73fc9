#pragma once
// Reads a whole file, gunzipping it when it is gzip (zlib reads plain files as they are).
#include <string>

namespace ember::data {

// Throws an ember::Error naming `what` and the path unless `path` is an existing regular file
// (or a link to one): a directory is "is a directory", a FIFO or a device "not a regular file",
// so no reader blocks on a pipe or sizes a directory as 2^63 bytes.
void check_regular_file(const std::string& path, const char* what);

// The file's (decompressed) bytes; an ember::Error names `what`, the path and the problem
// (missing file, not a regular file, corrupt or truncated gzip data, more than `limit` bytes: a zip bomb stops).
std::string read_gzip_or_plain(const std::string& path, size_t limit, const char* what);

}  // namespace ember::data
