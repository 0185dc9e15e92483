// Where a job's artifacts live and how they are named and written:
// <artifacts dir>/<job id>/<name>. Shared by the worker, which writes them
// (traces, snapshots, bundles), and the daemon, which lists and serves them
// (Bench.ListArtifacts / FetchArtifact). POSIX calls only: LibTorch exports
// std::filesystem symbols of its own.
#ifndef BENCHD_COMMON_ARTIFACTS_H_
#define BENCHD_COMMON_ARTIFACTS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace benchd {

// An artifact name: one path component of 1..255 letters, digits, '_', '-'
// or '.', not starting with '.' (so never "..", never hidden, never a path).
bool IsArtifactName(const std::string& name);
// OK for an artifact name, else INVALID_ARGUMENT naming `field`, quoting the
// name (escaped, cut short) and saying what a name is.
absl::Status CheckArtifactName(const std::string& name, absl::string_view field = "name");

// <artifacts_dir>/<job_id>, or <artifacts_dir>/<node>/<id> for "<node>/<id>": a
// rank that another cluster member runs here (server/cluster/node_service.h),
// under that member's folder. `request` ("memory", "profile", ...) opens the
// errors: FAILED_PRECONDITION without an artifacts dir, INVALID_ARGUMENT for
// a job id that is not one (common/job_id.h) or a node that is no node name
// (common/node_name.h), so it never names another folder.
absl::StatusOr<std::string> JobArtifactsDir(const std::string& artifacts_dir,
                                            const std::string& job_id, const std::string& request);

// mkdir -p; the folders it makes are 0700.
absl::Status MakeDirs(const std::string& dir);

// Writes through a temporary file renamed into place, so a reader never sees
// half an artifact. The file is 0600.
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace benchd

#endif  // BENCHD_COMMON_ARTIFACTS_H_
