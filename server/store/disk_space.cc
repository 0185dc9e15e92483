#include "server/store/disk_space.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace benchd::server {
namespace {

std::string Bytes(uint64_t n) {
  if (n < 1024) return absl::StrCat(n, " B");
  if (n < (1u << 20)) return absl::StrFormat("%.1f KiB", n / 1024.0);
  if (n < (1u << 30)) return absl::StrFormat("%.1f MiB", n / 1048576.0);
  return absl::StrFormat("%.1f GiB", n / 1073741824.0);
}

}  // namespace

absl::StatusOr<DiskSpace> GetDiskSpace(const std::string& path) {
  struct statvfs st;
  if (statvfs(path.c_str(), &st) != 0) {
    return absl::InternalError(absl::StrCat("statvfs ", path, ": ", std::strerror(errno)));
  }
  return DiskSpace{static_cast<uint64_t>(st.f_bavail) * st.f_frsize,
                   static_cast<uint64_t>(st.f_blocks) * st.f_frsize};
}

std::string DescribeDiskSpace(const std::string& path) {
  absl::StatusOr<DiskSpace> space = GetDiskSpace(path);
  if (!space.ok()) {
    return absl::StrCat("'", path, "' (free space unknown: ", space.status().message(), ")");
  }
  return absl::StrCat("'", path, "' (", Bytes(space->free_bytes), " free of ",
                      Bytes(space->total_bytes), ")");
}

absl::Status DataDirFullError(const std::string& data_dir, const std::string& what) {
  return absl::ResourceExhaustedError(absl::StrCat("the data dir ", DescribeDiskSpace(data_dir),
                                                   " is full: ", what,
                                                   "; free space there (reads still work)"));
}

}  // namespace benchd::server
