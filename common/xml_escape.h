// Text and attribute values for the SVGs benchd draws (common/memory_svg.cc,
// common/collective_svg.cc): XML's five special characters escaped, and the
// control characters XML 1.0 refuses (all below 0x20 but tab and newline)
// replaced by a space. Header-only: the two pictures live in different libraries.
#ifndef BENCHD_COMMON_XML_ESCAPE_H_
#define BENCHD_COMMON_XML_ESCAPE_H_

#include <string>

namespace benchd {

inline std::string XmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') ? ' ' : c;
    }
  }
  return out;
}

}  // namespace benchd

#endif  // BENCHD_COMMON_XML_ESCAPE_H_
