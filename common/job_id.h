// The one rule for a job id, everywhere (the service's requests, the store's
// key, the artifacts folder): the decimal string of a positive integer, as the
// store hands them out ("42"), without sign or leading zeros.
#ifndef BENCHD_COMMON_JOB_ID_H_
#define BENCHD_COMMON_JOB_ID_H_

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace benchd {

// The id's number, or INVALID_ARGUMENT naming `field`, what came and what is accepted.
absl::StatusOr<int64_t> ParseJobId(absl::string_view id, absl::string_view field = "job_id");
absl::Status CheckJobId(absl::string_view id, absl::string_view field = "job_id");

}  // namespace benchd

#endif  // BENCHD_COMMON_JOB_ID_H_
