// The job-id rule (common/job_id.h) on any string a request carries, and
// JobArtifactsDir built on it: an id is accepted exactly when it is the
// decimal string of a positive int64 without sign or leading zeros (so it
// round-trips), and an accepted id names one folder right under the
// artifacts dir; "NODE/ID" (a rank another cluster member runs here) is
// accepted exactly when NODE is a node name and ID a job id, and names
// <artifacts>/NODE/ID.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/artifacts.h"
#include "common/job_id.h"
#include "common/node_name.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& id) {
  std::fprintf(stderr, "job_id_fuzzer: %s: '%s' (%zu bytes)\n", what, id.c_str(), id.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string id(reinterpret_cast<const char*>(data), size);
  auto parsed = benchd::ParseJobId(id);
  if (parsed.ok() != benchd::CheckJobId(id, "job").ok())
    Fail("ParseJobId and CheckJobId differ", id);
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument)
      Fail("not INVALID_ARGUMENT", id);
    // The message quotes what came escaped and cut: bounded whatever the id.
    if (parsed.status().message().size() > 400) Fail("unbounded error message", id);
  } else {
    if (*parsed <= 0) Fail("a non-positive id accepted", id);
    if (absl::StrCat(*parsed) != id) Fail("an id that does not round-trip accepted", id);
  }
  auto dir = benchd::JobArtifactsDir("/data/artifacts/", id, "fuzz");
  const size_t slash = id.find('/');
  const bool forwarded = slash != std::string::npos && benchd::IsNodeName(id.substr(0, slash)) &&
                         benchd::ParseJobId(id.substr(slash + 1)).ok();
  if (dir.ok() != (parsed.ok() || forwarded))
    Fail("JobArtifactsDir disagrees with the id rule", id);
  if (dir.ok() && *dir != "/data/artifacts/" + id) Fail("JobArtifactsDir names another folder", id);
  return 0;
}
