// Job ids must never be reused against artifacts they do not own: the store
// hands out ids and artifacts/<id>/ is named by them, so a deleted or replaced
// store (ids from 1 again) would serve a new job 1 the old job 1's files.
//
// Why both a marker and a kept sequence: the marker (artifacts/.store-id,
// the store's random id) says whose folders these are; the folders themselves
// are the id sequence kept beside the artifacts. A new, empty store beside
// folders of another store adopts them and starts its ids above the highest
// folder (deleting benchd.sqlite3 to start afresh keeps working, and nothing
// old is ever served: ListArtifacts answers only for jobs the store has). A
// store that already has jobs cannot be renumbered, so it is refused beside
// another store's folders, saying which: serving them would mix two stores.
#ifndef BENCHD_SERVER_STORE_ARTIFACT_OWNER_H_
#define BENCHD_SERVER_STORE_ARTIFACT_OWNER_H_

#include <string>

#include "absl/status/status.h"
#include "server/store/store.h"

namespace benchd::server {

// The marker's name in the artifacts dir (hidden: never a job folder).
inline constexpr char kArtifactsOwnerFile[] = ".store-id";

// At start, before any job runs. The cases:
// - the marker names this store: ids are raised above every folder (cheap);
// - no job folders: the marker is written (a new or an empty data dir);
// - another store's folders (or folders without a marker) beside an empty
//   store: adopted, ids raised above them, the marker rewritten, one log line;
// - no marker, the store has jobs, and every folder is one of its jobs: a
//   data dir from before the marker; adopted;
// - otherwise FAILED_PRECONDITION naming the dir, both store ids (or the
//   folders the store does not know) and what to do.
absl::Status ClaimArtifactsDir(Store& store, const std::string& artifacts_dir);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_STORE_ARTIFACT_OWNER_H_
