#pragma once
// Numeric CSV for small tabular sets (gzipped or not): every row the same number of
// comma-separated numbers. The header line, when asked to skip it, is ignored.
#include <string>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember::data {

// The numbers row-major, before they become a tensor (the parser alone, as the fuzz target runs it).
struct CsvTable {
  std::vector<double> values;
  int64_t rows = 0, columns = 0;
};
CsvTable parse_csv_table(const std::string& text, const std::string& source, bool skip_header = false);

// [rows, columns] float64. Errors name the source, the line and the column.
Tensor parse_csv(const std::string& text, const std::string& source, bool skip_header = false);
Tensor read_csv(const std::string& path, bool skip_header = false);  // via zlib: .gz or plain

}  // namespace ember::data
