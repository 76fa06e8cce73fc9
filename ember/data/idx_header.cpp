// The IDX header parser, apart from tensor creation so that the fuzz target links only this.
#include <cstdio>

#include "ember/data/idx.h"
#include "ember/tensor/error.h"

namespace ember::data {

IdxHeader parse_idx_header(const uint8_t* data, size_t size, const std::string& source) {
  EMBER_CHECK(data != nullptr || size == 0, "IDX '", source, "': no data");
  EMBER_CHECK(size >= 4, "IDX '", source, "': the file is ", size, " bytes, shorter than the 4-byte magic number");
  EMBER_CHECK(data[0] == 0 && data[1] == 0, "IDX '", source, "': bad magic number (the first two bytes must be 0)");
  IdxHeader h;
  switch (data[2]) {
    case 0x08:
      h.dtype = kUInt8;
      break;
    case 0x09:
      h.dtype = kInt8;
      break;
    case 0x0C:
      h.dtype = kInt32;
      break;
    case 0x0D:
      h.dtype = kFloat32;
      break;
    case 0x0E:
      h.dtype = kFloat64;
      break;
    case 0x0B:
      throw Error("IDX '" + source + "': element type 0x0B (int16) is not supported (ember has no int16)");
    default: {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02X", data[2]);
      throw Error("IDX '" + source + "': unknown element type " + code);
    }
  }
  const size_t ndim = data[3];
  EMBER_CHECK(ndim >= 1 && ndim <= 8, "IDX '", source, "': ", ndim, " dimensions (expected 1 to 8)");
  h.data_offset = 4 + 4 * ndim;
  EMBER_CHECK(size >= h.data_offset, "IDX '", source, "': the file is ", size, " bytes, too short for ", ndim,
              " dimensions");
  uint64_t numel = 1;
  for (size_t d = 0; d < ndim; ++d) {
    const uint8_t* p = data + 4 + 4 * d;
    const uint64_t n = (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    h.shape.push_back(static_cast<int64_t>(n));
    // Checked before multiplying (found by fuzz_idx: 2^40 * 2^31 wrapped around to a small number).
    constexpr uint64_t kMaxElements = uint64_t{1} << 40;
    EMBER_CHECK(n == 0 || numel <= kMaxElements / n, "IDX '", source, "': dimensions ", shape_str(h.shape),
                "... are too large");
    numel *= n;
  }
  const uint64_t bytes = numel * element_size(h.dtype);
  EMBER_CHECK(bytes == size - h.data_offset, "IDX '", source, "': the header says ", shape_str(h.shape), " of ",
              h.dtype, " (", bytes, " bytes) but the file holds ", size - h.data_offset, " bytes of data");
  return h;
}

}  // namespace ember::data
