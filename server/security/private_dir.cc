#include "server/security/private_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace benchd::server {
namespace {

constexpr size_t kMaxSocketPath = 107;

// Opens `path` without following a link and checks it is a folder of ours;
// sets its mode to 0700.
absl::Status CheckPrivate(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is not a folder (a symbolic link?); benchd will not use it"));
    }
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(err)));
  }
  struct stat st {};
  absl::Status status;
  if (fstat(fd, &st) != 0) {
    status = absl::InternalError(absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  } else if (st.st_uid != geteuid()) {
    status = absl::FailedPreconditionError(absl::StrCat(path, " belongs to uid ", st.st_uid,
                                                        ", not to this user (", geteuid(),
                                                        "); benchd will "
                                                        "not use it"));
  } else if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) != 0) {
    status = absl::InternalError(
        absl::StrCat("cannot make ", path, " private (chmod 0700): ", std::strerror(errno)));
  }
  close(fd);
  return status;
}

}  // namespace

absl::Status MakePrivateDir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  return CheckPrivate(path);
}

std::vector<std::string> RuntimeDirCandidates() {
  std::vector<std::string> out;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/') {
    out.emplace_back(xdg);
  }
  const std::string run_user = absl::StrCat("/run/user/", getuid());
  struct stat st {};
  if (stat(run_user.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(run_user);
  out.emplace_back("/tmp");
  return out;
}

absl::StatusOr<std::string> MakeTemporaryRunDir(const std::vector<std::string>& bases,
                                                size_t reserve) {
  std::vector<std::string> tried;
  for (std::string base : bases) {
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    std::string path = absl::StrCat(base, "/benchd-run-", getuid(), "-", getpid(), "-XXXXXX");
    if (path.size() + reserve > kMaxSocketPath) {
      tried.push_back(absl::StrCat(base, " (path too long)"));
      continue;
    }
    if (mkdtemp(path.data()) == nullptr) {
      tried.push_back(absl::StrCat(base, " (", std::strerror(errno), ")"));
      continue;
    }
    if (absl::Status s = CheckPrivate(path); !s.ok()) {
      rmdir(path.c_str());
      tried.push_back(absl::StrCat(base, " (", s.message(), ")"));
      continue;
    }
    return path;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot make a folder for the workers' sockets: tried ", absl::StrJoin(tried, ", ")));
}

}  // namespace benchd::server
