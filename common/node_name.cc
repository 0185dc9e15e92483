#include "common/node_name.h"

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace benchd {

bool IsNodeName(absl::string_view name) {
  return !name.empty() && name.size() <= 63 && absl::ascii_islower(name[0]) &&
         absl::c_all_of(name, [](char c) {
           return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
         });
}

absl::Status CheckNodeName(absl::string_view field, absl::string_view name) {
  if (IsNodeName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": not a node name: got ", QuotedForError(name),
                   "; expected 1..63 characters of a-z, 0-9 and '-', starting with a letter"));
}

}  // namespace benchd
