#include "data/csv.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "data/gzip_file.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace ember::data {

Tensor parse_csv(const std::string& text, const std::string& source, bool skip_header) {
  std::vector<double> values;
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
      const bool blank_tail = stop != nullptr && std::string(stop).find_first_not_of(" \t") == std::string::npos;
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
  Tensor out = empty({rows, columns}, kFloat64);
  std::copy(values.begin(), values.end(), out.data_ptr<double>());
  return out;
}

Tensor read_csv(const std::string& path, bool skip_header) {
  // Small tabular sets only: 1 GiB of text at most.
  return parse_csv(read_gzip_or_plain(path, size_t{1} << 30, "CSV"), path, skip_header);
}

}  // namespace ember::data
