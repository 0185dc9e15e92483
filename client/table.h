// Plain-text tables and key/value blocks, aligned with spaces (no box
// drawing, so output survives grep, less and copy-paste).
#ifndef BENCHD_CLIENT_TABLE_H_
#define BENCHD_CLIENT_TABLE_H_

#include <string>
#include <utility>
#include <vector>

namespace benchd::client {

class Table {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit Table(std::vector<Column> columns);

  // Missing cells are blank, extra ones dropped.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // Header line then one line per row, columns separated by two spaces, each
  // line ending in '\n' without trailing spaces. `indent` prefixes every line.
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// "Key        value" lines with the values aligned after the longest key, or
// after `min_key_width` columns so several blocks of one report line up.
std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& pairs,
                      size_t min_key_width = 0);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_TABLE_H_
