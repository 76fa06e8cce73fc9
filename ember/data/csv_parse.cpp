// The CSV text parser alone (no tensors), so that the fuzz target links just this file.
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "ember/data/csv.h"
#include "ember/tensor/error.h"

namespace ember::data {

CsvTable parse_csv_table(const std::string& text, const std::string& source, bool skip_header) {
  CsvTable table;
  std::vector<double>& values = table.values;
  int64_t columns = -1, rows = 0, line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (skip_header && line_no == 1)) continue;
    int64_t count = 0;
    size_t field = 0;
    for (;;) {
      const size_t comma = line.find(',', field);
      const std::string cell = line.substr(field, comma == std::string::npos ? std::string::npos : comma - field);
      char* stop = nullptr;
      errno = 0;
      const double v = std::strtod(cell.c_str(), &stop);
      // The tail by length, not as a C string: a NUL byte inside a cell must not end it.
      const size_t used = static_cast<size_t>(stop - cell.c_str());
      const bool blank_tail = cell.find_first_not_of(" \t", used) == std::string::npos;
      EMBER_CHECK(!cell.empty() && stop != cell.c_str() && blank_tail && errno != ERANGE && std::isfinite(v), "CSV '",
                  source, "': line ", line_no, ", column ", count + 1, ": '", cell.substr(0, 40), "' is not a number");
      values.push_back(v);
      ++count;
      if (comma == std::string::npos) break;
      field = comma + 1;
    }
    EMBER_CHECK(columns < 0 || count == columns, "CSV '", source, "': line ", line_no, " has ", count,
                " columns, the lines before it ", columns);
    columns = count;
    ++rows;
  }
  EMBER_CHECK(rows > 0, "CSV '", source, "': no data rows");
  table.rows = rows;
  table.columns = columns;
  return table;
}

}  // namespace ember::data
