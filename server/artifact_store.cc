#include "server/artifact_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/artifacts.h"

namespace benchd::server {

ArtifactReader::~ArtifactReader() { close(fd_); }

absl::StatusOr<std::string> ArtifactReader::Next(size_t max_bytes) {
  const size_t want = static_cast<size_t>(std::min<int64_t>(max_bytes, size_ - offset_));
  std::string chunk(want, '\0');
  size_t got = 0;
  while (got < want) {
    const ssize_t n = pread(fd_, chunk.data() + got, want - got, offset_ + got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return absl::InternalError(absl::StrCat("reading the artifact: ", std::strerror(errno)));
    if (n == 0) {
      return absl::InternalError(absl::StrCat("the artifact shrank while being read: ", size_,
                                              " bytes expected, ", offset_ + got, " found"));
    }
    got += static_cast<size_t>(n);
  }
  offset_ += static_cast<int64_t>(want);
  return chunk;
}

absl::StatusOr<std::string> ArtifactStore::JobDir(const std::string& job_id) const {
  if (job_id.empty()) return absl::InvalidArgumentError("job_id: expected a job id, got nothing");
  return JobArtifactsDir(dir_, job_id, "job_id");
}

absl::StatusOr<std::vector<v1::Artifact>> ArtifactStore::List(const std::string& job_id) const {
  auto dir = JobDir(job_id);
  if (!dir.ok()) return dir.status();
  std::vector<v1::Artifact> out;
  DIR* d = opendir(dir->c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;  // the job wrote nothing
    return absl::InternalError(absl::StrCat("listing ", *dir, ": ", std::strerror(errno)));
  }
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (!IsArtifactName(name) || name.ends_with(".tmp")) continue;  // ".", "..", half-written
    struct stat st {};
    if (fstatat(dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    v1::Artifact a;
    a.set_name(name);
    a.set_size_bytes(st.st_size);
    out.push_back(std::move(a));
  }
  closedir(d);
  std::sort(out.begin(), out.end(),
            [](const v1::Artifact& a, const v1::Artifact& b) { return a.name() < b.name(); });
  return out;
}

absl::StatusOr<std::unique_ptr<ArtifactReader>> ArtifactStore::Open(const std::string& job_id,
                                                                    const std::string& name) const {
  auto dir = JobDir(job_id);
  if (!dir.ok()) return dir.status();
  if (!IsArtifactName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name: expected an artifact name as ListArtifacts gives it (one file name of letters, "
        "digits, '_', '-' and '.', not starting with '.'), got '",
        name, "'"));
  }
  const std::string path = absl::StrCat(*dir, "/", name);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) close(fd);
    std::vector<std::string> names;
    if (auto listed = List(job_id); listed.ok()) {
      for (const v1::Artifact& a : *listed) names.push_back(a.name());
    }
    return absl::NotFoundError(absl::StrCat("job ", job_id, " has no artifact '", name,
                                            "'; it has ",
                                            names.empty() ? "none" : absl::StrJoin(names, ", ")));
  }
  return std::make_unique<ArtifactReader>(fd, static_cast<int64_t>(st.st_size));
}

}  // namespace benchd::server
