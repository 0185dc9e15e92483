// ListJobs' page tokens: opaque to clients, they carry where the next page
// starts and the filters they were made for, so a token is refused with
// other filters instead of silently answering a different query.
#ifndef BENCHD_SERVER_API_PAGE_TOKEN_H_
#define BENCHD_SERVER_API_PAGE_TOKEN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/store.h"

namespace benchd::server {

std::string EncodePageToken(const JobFilter& filter, int64_t before_id);
// The before_id of a token made for `filter`; INVALID_ARGUMENT naming
// page_token for anything else (a token over kMaxPageTokenBytes is refused
// undecoded). "" decodes to 0 (the first page).
absl::StatusOr<int64_t> DecodePageToken(const std::string& token, const JobFilter& filter);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_API_PAGE_TOKEN_H_
