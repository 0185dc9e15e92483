// How full the disk under a path is (statvfs), for errors that must say so:
// a full data disk is the operator's to fix, and they need the path and the
// figures, not SQLite's "database or disk is full".
#ifndef BENCHD_SERVER_STORE_DISK_SPACE_H_
#define BENCHD_SERVER_STORE_DISK_SPACE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace benchd::server {

struct DiskSpace {
  uint64_t free_bytes = 0;   // available to an unprivileged user (f_bavail)
  uint64_t total_bytes = 0;  // the filesystem's size
};

absl::StatusOr<DiskSpace> GetDiskSpace(const std::string& path);

// "'/data' (0 B free of 16.0 MiB)", or "'/data' (free space unknown: ...)".
std::string DescribeDiskSpace(const std::string& path);

// RESOURCE_EXHAUSTED "the data dir '/data' is full (0 B free of 16.0 MiB): <what>; ..."
absl::Status DataDirFullError(const std::string& data_dir, const std::string& what);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_STORE_DISK_SPACE_H_
