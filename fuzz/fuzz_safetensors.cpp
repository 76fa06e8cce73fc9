// libFuzzer target: the safetensors header parser on arbitrary bytes. Any outcome other than
// a parsed header or an ember::Error (a crash, a sanitizer report, another exception type,
// a hang) is a bug. Seeds: fuzz/corpus/safetensors/.
#include <cstddef>
#include <cstdint>

#include "ember/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto header = ember::io::parse_safetensors_header(data, size, "fuzz input");
    // Every accepted entry must lie inside the input: the reader memcpy's these ranges.
    for (const auto& e : header.entries)
      if (header.data_offset + e.end > size) __builtin_trap();
  } catch (const ember::Error&) {
  }
  return 0;
}
