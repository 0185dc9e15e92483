// ResolveJobSpec on any JobSpec a client can send (the bytes are the binary
// proto; seeds in fuzz/corpus/job_spec). Beyond not crashing, what the
// daemon and the worker rely on: a resolved spec resolves again to itself
// (the worker re-resolves what the daemon stored), and the helpers the
// daemon calls on a resolved spec are total.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "benchd/v1/bench.pb.h"
#include "common/job_spec.h"
#include "common/model_config.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"

namespace {

[[noreturn]] void Fail(const char* what, const benchd::v1::JobSpec& spec) {
  std::fprintf(stderr, "job_spec_fuzzer: %s\n%s\n", what, spec.DebugString().c_str());
  std::abort();
}

void CheckResolved(const benchd::v1::JobSpec& resolved) {
  auto again = benchd::ResolveJobSpec(resolved);
  if (!again.ok()) {
    std::fprintf(stderr, "%s\n", std::string(again.status().message()).c_str());
    Fail("a resolved spec does not resolve again", resolved);
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(*again, resolved)) {
    Fail("resolving a resolved spec changes it", resolved);
  }
  (void)benchd::JobKindName(resolved);
  for (const char* device : {"cpu:0", "cuda:0", "cuda:1"}) {
    (void)benchd::CheckKindForDevice(resolved, device);
  }
  switch (resolved.kind_case()) {
    case benchd::v1::JobSpec::kBenchmark:
      (void)benchd::ParameterCount(resolved.benchmark().model());
      (void)benchd::StepFlops(resolved.benchmark().model(), resolved.benchmark().mode(),
                              resolved.benchmark().batch_size(),
                              resolved.benchmark().context_length());
      break;
    case benchd::v1::JobSpec::kMemory:
      for (const auto& cell : benchd::MemoryRunSpecs(resolved.memory(), resolved.memory().step())) {
        (void)benchd::MemoryRunName(cell);
      }
      break;
    case benchd::v1::JobSpec::kCollective:
      (void)benchd::CollectiveSeries(resolved.collective());
      (void)benchd::CollectiveDevices(resolved.collective());
      break;
    default:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // "invalid UTF-8" on every other input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  benchd::v1::JobSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return -1;  // not kept in the corpus
  auto resolved = benchd::ResolveJobSpec(spec);
  if (resolved.ok()) CheckResolved(*resolved);
  return 0;
}
