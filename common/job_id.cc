#include "common/job_id.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace benchd {

absl::StatusOr<int64_t> ParseJobId(absl::string_view id, absl::string_view field) {
  int64_t value = 0;
  const bool digits =
      !id.empty() && id.size() <= kMaxJobIdBytes && id[0] != '0' &&
      std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!digits || !absl::SimpleAtoi(id, &value) || value <= 0) {
    // Quoted with escapes and cut short: the id may be anything a client sent.
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", QuotedForError(id),
                     " is not a job id; expected a positive integer such as 42"));
  }
  return value;
}

absl::Status CheckJobId(absl::string_view id, absl::string_view field) {
  return ParseJobId(id, field).status();
}

}  // namespace benchd
