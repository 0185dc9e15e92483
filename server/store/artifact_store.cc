#include "server/store/artifact_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

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

namespace {

// Closes a file descriptor when it goes out of scope (unless released).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

// The job's folder, opened without following a link at either level: the
// artifacts root, then <job id> with O_NOFOLLOW. -1 with `*missing` set when
// the job wrote nothing; FAILED_PRECONDITION when <job id> is not a folder
// (a symbolic link to one included), so nothing outside is ever listed or served.
absl::StatusOr<int> ArtifactStore::OpenJobDir(const std::string& job_id, bool* missing) const {
  auto dir = JobDir(job_id);
  if (!dir.ok()) return dir.status();
  *missing = false;
  Fd root(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) {
    if (errno == ENOENT) {
      *missing = true;
      return -1;
    }
    return absl::InternalError(absl::StrCat("opening ", dir_, ": ", std::strerror(errno)));
  }
  const int fd =
      openat(root.get(), job_id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno == ENOENT) {
    *missing = true;
    return -1;
  }
  if (errno == ELOOP || errno == ENOTDIR) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, ": ", *dir,
                     " is not a folder (a symbolic link?); its artifacts are not served"));
  }
  return absl::InternalError(absl::StrCat("opening ", *dir, ": ", std::strerror(errno)));
}

absl::StatusOr<std::vector<v1::Artifact>> ArtifactStore::List(const std::string& job_id) const {
  bool missing = false;
  auto fd = OpenJobDir(job_id, &missing);
  if (!fd.ok()) return fd.status();
  std::vector<v1::Artifact> out;
  if (missing) return out;  // the job wrote nothing
  DIR* d = fdopendir(*fd);
  if (d == nullptr) {
    const std::string err = std::strerror(errno);
    close(*fd);
    return absl::InternalError(absl::StrCat("listing the artifacts of job ", job_id, ": ", err));
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
  closedir(d);  // closes *fd
  std::sort(out.begin(), out.end(),
            [](const v1::Artifact& a, const v1::Artifact& b) { return a.name() < b.name(); });
  return out;
}

absl::StatusOr<std::unique_ptr<ArtifactReader>> ArtifactStore::Open(const std::string& job_id,
                                                                    const std::string& name) const {
  if (auto dir = JobDir(job_id); !dir.ok()) return dir.status();
  if (auto s = CheckArtifactName(name, "name"); !s.ok()) return s;
  bool missing = false;
  auto dir_fd = OpenJobDir(job_id, &missing);
  if (!dir_fd.ok()) return dir_fd.status();
  Fd dir(*dir_fd);
  // A .tmp is an artifact still being written (WriteFileAtomically): not listed, not served.
  Fd file(missing || name.ends_with(".tmp")
              ? -1
              : openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (file.get() < 0 || fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::vector<std::string> names;
    if (auto listed = List(job_id); listed.ok()) {
      for (const v1::Artifact& a : *listed) names.push_back(a.name());
    }
    return absl::NotFoundError(absl::StrCat("job ", job_id, " has no artifact '", name,
                                            "'; it has ",
                                            names.empty() ? "none" : absl::StrJoin(names, ", ")));
  }
  return std::make_unique<ArtifactReader>(file.release(), static_cast<int64_t>(st.st_size));
}

}  // namespace benchd::server
