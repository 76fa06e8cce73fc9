// libFuzzer target: the IDX (MNIST) header parser on arbitrary bytes. Anything but a parsed
// header or an ember::Error is a bug. Seeds: fuzz/corpus/idx/.
#include <cstddef>
#include <cstdint>

#include "ember/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto header = ember::data::parse_idx_header(data, size, "fuzz input");
    // The data it accepted must be exactly the rest of the input: parse_idx copies that much.
    unsigned __int128 numel = 1;
    for (int64_t d : header.shape) numel *= static_cast<uint64_t>(d);
    if (header.data_offset + numel * ember::element_size(header.dtype) != size) __builtin_trap();
  } catch (const ember::Error&) {
  }
  return 0;
}
