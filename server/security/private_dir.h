// Folders only this user may enter: the daemon's logs/, run/ (worker sockets)
// and artifacts/, and the run folder it makes outside a data dir whose path is
// too long for a Unix socket.
#ifndef BENCHD_SERVER_SECURITY_PRIVATE_DIR_H_
#define BENCHD_SERVER_SECURITY_PRIVATE_DIR_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace benchd::server {

// Makes `path` (its parent must exist) or takes the one there, and leaves it
// mode 0700. FAILED_PRECONDITION when it is a symbolic link, not a folder, or
// owned by another user: it is never followed.
absl::Status MakePrivateDir(const std::string& path);

// Where a fallback run folder may go, in order: $XDG_RUNTIME_DIR (when
// absolute), /run/user/<uid> (when it exists), /tmp.
std::vector<std::string> RuntimeDirCandidates();

// A new folder "<base>/benchd-run-<uid>-<pid>-XXXXXX" made by mkdtemp (so
// never an existing path or link) in the first of `bases` where the folder's
// path plus `reserve` bytes fits in a Unix socket path (107 bytes), checked to
// be ours and 0700. The caller removes it when done.
absl::StatusOr<std::string> MakeTemporaryRunDir(const std::vector<std::string>& bases,
                                                size_t reserve);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_SECURITY_PRIVATE_DIR_H_
