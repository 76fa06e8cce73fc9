#include "ember/data/csv.h"

#include <algorithm>

#include "ember/data/gzip_file.h"
#include "ember/tensor/error.h"
#include "ember/tensor/ops.h"

namespace ember::data {

Tensor parse_csv(const std::string& text, const std::string& source, bool skip_header) {
  const CsvTable table = parse_csv_table(text, source, skip_header);
  Tensor out = empty({table.rows, table.columns}, kFloat64);
  std::copy(table.values.begin(), table.values.end(), out.data_ptr<double>());
  return out;
}

Tensor read_csv(const std::string& path, bool skip_header) {
  // Small tabular sets only: 1 GiB of text at most.
  return parse_csv(read_gzip_or_plain(path, size_t{1} << 30, "CSV"), path, skip_header);
}

}  // namespace ember::data
