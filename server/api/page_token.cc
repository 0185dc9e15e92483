#include "server/api/page_token.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/limits.h"

namespace benchd::server {
namespace {

// "1" is the token format's version; the filters follow the start id.
std::string Plain(const JobFilter& f, int64_t before_id) {
  return absl::StrCat("1|", before_id, "|", static_cast<int>(f.state), "|",
                      static_cast<int>(f.kind), "|", f.device);
}

}  // namespace

std::string EncodePageToken(const JobFilter& filter, int64_t before_id) {
  return absl::WebSafeBase64Escape(Plain(filter, before_id));
}

absl::StatusOr<int64_t> DecodePageToken(const std::string& token, const JobFilter& filter) {
  if (token.empty()) return 0;
  // Never decoded: no token this daemon gives is that long.
  if (token.size() > kMaxPageTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token: expected a ListJobs reply's next_page_token (at most ",
                     kMaxPageTokenBytes, " bytes), got ", token.size(), " bytes"));
  }
  std::string plain;
  int64_t before_id = 0;
  const std::vector<std::string> parts = absl::WebSafeBase64Unescape(token, &plain)
                                             ? absl::StrSplit(plain, absl::MaxSplits('|', 4))
                                             : std::vector<std::string>();
  if (parts.size() != 5 || parts[0] != "1" || !absl::SimpleAtoi(parts[1], &before_id) ||
      before_id <= 0) {
    return absl::InvalidArgumentError(
        "page_token: not a token this daemon gave; pass a ListJobs reply's next_page_token "
        "unchanged, or \"\" for the first page");
  }
  if (plain != Plain(filter, before_id)) {
    return absl::InvalidArgumentError(
        "page_token: it was made for other filters (state, kind, device); ask for the next page "
        "with the filters of the page it came from");
  }
  return before_id;
}

}  // namespace benchd::server
