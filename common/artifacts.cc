#include "common/artifacts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/job_id.h"
#include "common/limits.h"
#include "common/node_name.h"

namespace benchd {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

}  // namespace

bool IsArtifactName(const std::string& name) {
  if (name.empty() || name.size() > kMaxArtifactNameBytes || name.front() == '.') return false;
  for (char c : name) {
    if (!IsNameChar(c) && c != '.') return false;
  }
  return true;
}

absl::Status CheckArtifactName(const std::string& name, absl::string_view field) {
  if (IsArtifactName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": expected an artifact name as ListArtifacts gives it (one file name of 1..",
      kMaxArtifactNameBytes, " letters, digits, '_', '-' and '.', not starting with '.'), got ",
      QuotedForError(name)));
}

absl::StatusOr<std::string> JobArtifactsDir(const std::string& artifacts_dir,
                                            const std::string& job_id, const std::string& request) {
  if (artifacts_dir.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        request,
        ": this worker was started without --artifacts-dir, so it has nowhere to write "
        "its artifacts (benchd passes <data-dir>/artifacts)"));
  }
  // A run another cluster member sent (server/cluster/node_service.cc) is
  // "NODE/ID": its artifacts go under that member's folder, apart from this
  // node's own jobs (a node name is never all digits, so never a job id).
  const size_t slash = job_id.find('/');
  if (slash != std::string::npos) {
    if (auto s = CheckNodeName("job_id's node", job_id.substr(0, slash)); !s.ok()) return s;
  }
  if (auto s = CheckJobId(slash == std::string::npos ? job_id : job_id.substr(slash + 1));
      !s.ok()) {
    return s;
  }
  std::string dir = artifacts_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return absl::StrCat(dir, "/", job_id);
}

absl::Status MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string prefix = dir.substr(0, i);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("mkdir ", prefix, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", tmp, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      close(fd);
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("write ", tmp, ": ", err));
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("write ", path, ": ", err));
  }
  return absl::OkStatus();
}

}  // namespace benchd
