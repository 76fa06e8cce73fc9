// libFuzzer target: the numeric CSV parser on arbitrary text. Anything but a parsed table or an
// ember::Error is a bug. Seeds: fuzz/corpus/csv/.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ember/data/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool skip_header : {false, true}) {
    try {
      const auto table = ember::data::parse_csv_table(text, "fuzz input", skip_header);
      // A table is a non-empty rectangle of finite numbers.
      if (table.rows <= 0 || table.columns <= 0 ||
          table.values.size() != static_cast<size_t>(table.rows) * static_cast<size_t>(table.columns))
        __builtin_trap();
      for (double v : table.values)
        if (!std::isfinite(v)) __builtin_trap();
    } catch (const ember::Error&) {
    }
  }
  return 0;
}
