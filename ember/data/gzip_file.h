#pragma once
// Reads a whole file, gunzipping it when it is gzip (zlib reads plain files as they are).
#include <string>

namespace ember::data {

// The file's (decompressed) bytes; an ember::Error names `what`, the path and the problem
// (missing file, corrupt or truncated gzip data, more than `limit` bytes: a zip bomb stops).
std::string read_gzip_or_plain(const std::string& path, size_t limit, const char* what);

}  // namespace ember::data
