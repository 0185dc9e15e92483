#include "client/table.h"

#include <algorithm>

namespace benchd::client {
namespace {

// Display width, counting UTF-8 code points (device names may hold "×" etc.).
size_t Width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void RStrip(std::string& s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
}

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render(const std::string& indent) const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = Width(columns_[c].header);
    for (const auto& row : rows_) widths[c] = std::max(widths[c], Width(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = indent;
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c > 0) out += "  ";
      const std::string pad(widths[c] - Width(cells[c]), ' ');
      out += columns_[c].align == Align::kRight ? pad + cells[c] : cells[c] + pad;
    }
    RStrip(out);
    return out + "\n";
  };
  std::vector<std::string> headers;
  for (const auto& col : columns_) headers.push_back(col.header);
  std::string out = line(headers);
  for (const auto& row : rows_) out += line(row);
  return out;
}

std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& pairs,
                      size_t min_key_width) {
  size_t width = min_key_width;
  for (const auto& [key, value] : pairs) width = std::max(width, Width(key));
  std::string out;
  for (const auto& [key, value] : pairs) {
    std::string line = key + std::string(width - Width(key) + 2, ' ') + value;
    RStrip(line);
    out += line + "\n";
  }
  return out;
}

}  // namespace benchd::client
