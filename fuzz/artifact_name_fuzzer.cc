// The artifact name rule (common/artifacts.h IsArtifactName) and the
// daemon's use of it (server/store/artifact_store.cc: ListArtifacts,
// FetchArtifact) on any job id and name a request carries, against a real
// folder: <root>/artifacts/7/ holds two artifacts, a half-written one
// (.tmp), a symbolic link to a file outside, a subfolder and a FIFO;
// <root>/artifacts/8 is a link to 7; <root>/secret lies outside. Whatever
// comes, nothing but job 7's two artifacts is ever listed or opened.
//
// Input: the job id, a backslash and one more byte, then the name (libFuzzer's
// FuzzedDataProvider::ConsumeRandomLengthString: "7\/trace.json").
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuzzer/FuzzedDataProvider.h>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "common/artifacts.h"
#include "server/store/artifact_store.h"

namespace {

const std::set<std::string> kArtifacts = {"trace.json", "snapshot.pickle"};

void Write(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
}

char tree_root[] = "/tmp/benchd-artifact-fuzz-XXXXXX";

void RemoveTree() {
  const std::string root = tree_root, job = root + "/artifacts/7";
  for (const char* f : {"trace.json", "snapshot.pickle", "half.json.tmp", "link", "fifo"}) {
    unlink((job + "/" + f).c_str());
  }
  rmdir((job + "/sub").c_str());
  rmdir(job.c_str());
  unlink((root + "/artifacts/8").c_str());
  rmdir((root + "/artifacts").c_str());
  unlink((root + "/secret").c_str());
  rmdir(root.c_str());
}

std::string MakeTree() {
  if (mkdtemp(tree_root) == nullptr) std::abort();
  std::atexit(RemoveTree);
  const std::string root = tree_root;
  const std::string job = root + "/artifacts/7";
  if (!benchd::MakeDirs(job + "/sub").ok()) std::abort();
  Write(root + "/secret", "outside");
  Write(job + "/trace.json", "{}");
  Write(job + "/snapshot.pickle", "snapshot");
  Write(job + "/half.json.tmp", "half");
  if (symlink("../../secret", (job + "/link").c_str()) != 0) std::abort();
  if (symlink("7", (root + "/artifacts/8").c_str()) != 0) std::abort();
  if (mkfifo((job + "/fifo").c_str(), 0600) != 0) std::abort();
  return root;
}

[[noreturn]] void Fail(const char* what, const std::string& job, const std::string& name) {
  std::fprintf(stderr, "artifact_name_fuzzer: %s: job '%s', name '%s'\n", what, job.c_str(),
               name.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root = MakeTree();
  static const benchd::server::ArtifactStore store(root + "/artifacts");
  FuzzedDataProvider in(data, size);
  const std::string job = in.ConsumeRandomLengthString(64);
  const std::string name = in.ConsumeRemainingBytesAsString();

  // The rule itself: one plain path component.
  if (benchd::IsArtifactName(name)) {
    if (name.empty() || name.size() > 255 || name[0] == '.' ||
        name.find_first_of(std::string("/\0", 2)) != std::string::npos) {
      Fail("IsArtifactName accepts a name that is not one path component", job, name);
    }
  }

  auto listed = store.List(job);
  if (listed.ok()) {
    for (const auto& a : *listed) {
      if (job != "7" || !kArtifacts.count(a.name())) Fail("List shows a stranger", job, a.name());
    }
  }
  auto reader = store.Open(job, name);
  if (reader.ok()) {
    if (job != "7" || !kArtifacts.count(name)) Fail("Open opens a stranger", job, name);
    while (!(*reader)->done()) {
      auto chunk = (*reader)->Next(3);
      if (!chunk.ok()) Fail("reading an artifact fails", job, name);
    }
  } else if (job == "7" && kArtifacts.count(name)) {
    Fail("Open refuses an artifact", job, name);
  }
  return 0;
}
