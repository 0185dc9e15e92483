// A job's artifacts as the daemon serves them (Bench.ListArtifacts,
// Bench.FetchArtifact): the files the worker wrote under
// <artifacts dir>/<job id>/. Names are checked to be one plain path
// component (common/artifacts.h), and neither <job id> nor a file in it is
// followed when it is a symbolic link, so no request reaches outside that folder.
#ifndef BENCHD_SERVER_STORE_ARTIFACT_STORE_H_
#define BENCHD_SERVER_STORE_ARTIFACT_STORE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::server {

// An artifact open for reading, in chunks, from the start.
class ArtifactReader {
 public:
  ArtifactReader(int fd, int64_t size) : fd_(fd), size_(size) {}
  ~ArtifactReader();
  ArtifactReader(const ArtifactReader&) = delete;
  ArtifactReader& operator=(const ArtifactReader&) = delete;

  int64_t size() const { return size_; }
  int64_t offset() const { return offset_; }
  bool done() const { return offset_ >= size_; }
  // The next chunk of at most `max_bytes`; INTERNAL on a read error, or when
  // the file shrank while being read.
  absl::StatusOr<std::string> Next(size_t max_bytes);

 private:
  int fd_;
  int64_t size_;
  int64_t offset_ = 0;
};

class ArtifactStore {
 public:
  explicit ArtifactStore(std::string artifacts_dir) : dir_(std::move(artifacts_dir)) {}

  const std::string& dir() const { return dir_; }
  // <artifacts dir>/<job id> (the folder need not exist yet).
  absl::StatusOr<std::string> JobDir(const std::string& job_id) const;
  // The job's artifacts by name (regular files only; none when the job wrote
  // none). INVALID_ARGUMENT for a job id that cannot name a folder,
  // FAILED_PRECONDITION when <job id> is not a folder (e.g. a symbolic link).
  absl::StatusOr<std::vector<v1::Artifact>> List(const std::string& job_id) const;
  // INVALID_ARGUMENT for a bad name, NOT_FOUND (naming what the job has) for
  // one the job did not write.
  absl::StatusOr<std::unique_ptr<ArtifactReader>> Open(const std::string& job_id,
                                                       const std::string& name) const;

 private:
  absl::StatusOr<int> OpenJobDir(const std::string& job_id, bool* missing) const;

  std::string dir_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_STORE_ARTIFACT_STORE_H_
