#include "server/store/artifact_owner.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/artifacts.h"
#include "common/job_id.h"

namespace benchd::server {
namespace {

// The job ids of the folders in `dir` (names that are job ids; anything else
// is not a job's).
absl::StatusOr<std::vector<int64_t>> JobFolders(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return std::vector<int64_t>{};
    return absl::InternalError(absl::StrCat("open ", dir, ": ", std::strerror(errno)));
  }
  std::vector<int64_t> ids;
  while (dirent* e = readdir(d)) {
    absl::StatusOr<int64_t> id = ParseJobId(e->d_name);
    if (id.ok()) ids.push_back(*id);
  }
  closedir(d);
  return ids;
}

// The marker's store id, "" if there is none.
absl::StatusOr<std::string> ReadOwner(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  }
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  if (n < 0) return absl::InternalError(absl::StrCat("read ", path, ": ", std::strerror(errno)));
  return std::string(absl::StripAsciiWhitespace(absl::string_view(buf, n)));
}

std::string Summarize(const std::vector<int64_t>& ids) {
  std::vector<int64_t> shown(ids.begin(), ids.begin() + std::min<size_t>(ids.size(), 5));
  return absl::StrCat(absl::StrJoin(shown, ", "), ids.size() > shown.size() ? ", ..." : "");
}

}  // namespace

absl::Status ClaimArtifactsDir(Store& store, const std::string& artifacts_dir) {
  if (auto s = MakeDirs(artifacts_dir); !s.ok()) return s;
  const std::string marker = absl::StrCat(artifacts_dir, "/", kArtifactsOwnerFile);
  absl::StatusOr<std::string> owner = ReadOwner(marker);
  if (!owner.ok()) return owner.status();
  absl::StatusOr<std::vector<int64_t>> folders = JobFolders(artifacts_dir);
  if (!folders.ok()) return folders.status();
  int64_t highest = 0;
  for (int64_t id : *folders) highest = std::max(highest, id);
  absl::StatusOr<int64_t> last = store.LastId();
  if (!last.ok()) return last.status();

  const bool ours = *owner == store.store_id();
  if (!ours && !folders->empty() && *last > 0) {
    if (!owner->empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the artifacts in ", artifacts_dir, " belong to store ", *owner,
          " but the store beside them is ", store.store_id(), " (its jobs go up to ", *last,
          "): its jobs would be served the other store's files. Move ", artifacts_dir,
          " aside (or put back that store's benchd.sqlite3), or use another --data-dir"));
    }
    // From before the marker: ours if the store knows every folder's job.
    std::vector<int64_t> unknown;
    for (int64_t id : *folders) {
      if (id > *last || !store.Get(absl::StrCat(id)).ok()) unknown.push_back(id);
    }
    if (!unknown.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(artifacts_dir, " has folders of jobs this store does not have (",
                       Summarize(unknown), "), and no ", kArtifactsOwnerFile,
                       " saying whose they are: they belong to another "
                       "store. Move ",
                       artifacts_dir, " aside, or use another --data-dir"));
    }
  }
  if (!ours && !folders->empty() && *last == 0) {
    fprintf(stderr,
            "benchd: %s holds folders of another store's jobs (%s; up to %lld); this new store "
            "(%s) adopts the folder and starts its job ids at %lld, so none is reused\n",
            artifacts_dir.c_str(), owner->empty() ? "no owner recorded" : owner->c_str(),
            static_cast<long long>(highest), store.store_id().c_str(),
            static_cast<long long>(highest + 1));
  }
  // Ids stay above every folder whoever made it (a worker writes a job's
  // folder; a job whose row was lost must not lend its id to a new one).
  if (highest > *last) {
    if (auto s = store.ReserveIdsThrough(highest); !s.ok()) return s;
  }
  if (!ours) return WriteFileAtomically(marker, store.store_id() + "\n");
  return absl::OkStatus();
}

}  // namespace benchd::server
