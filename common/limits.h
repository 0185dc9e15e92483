// Every limit on what a request to benchd may carry, in one place: the
// lengths of strings, the lengths of lists, the ranges of numbers and the
// size of a whole message. A refusal names the field, what came (quoted and
// cut short: never a client's megabyte echoed back) and the limit.
//
// Strings and lists are checked by CheckSizeLimits (common/job_spec.h) from
// the tables below, keyed by the field's full proto name; a string or list
// field of a request that is not in a table is refused at the defaults
// kDefaultMaxStringBytes / kDefaultMaxListLength, and job_spec_test fails
// until it is given a row here (so a new field gets a limit on purpose).
#ifndef BENCHD_COMMON_LIMITS_H_
#define BENCHD_COMMON_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/collective_math.h"

namespace benchd {

// ---------------------------------------------------------------- messages

// The largest request the daemon should take (grpc::ServerBuilder::
// SetMaxReceiveMessageSize): the largest request these limits allow is a
// collective JobSpec of about 40 KB (job_spec_test checks it stays under a
// quarter of this), so anything near this is not a request but a mistake or
// an attack; gRPC refuses it with RESOURCE_EXHAUSTED before it is parsed.
inline constexpr int kMaxRequestBytes = 256 * 1024;

// How much of a refused string an error message quotes.
inline constexpr size_t kMaxQuotedBytes = 64;

// ---------------------------------------------------------------- strings

inline constexpr size_t kMaxDeviceNameBytes = 32;     // "cuda:7"
inline constexpr size_t kMaxPresetNameBytes = 64;     // "2.7B"
inline constexpr size_t kMaxGroupIdBytes = 32;        // "g12", "t3"
inline constexpr size_t kMaxJobIdBytes = 18;          // decimal digits of a positive int64
inline constexpr size_t kMaxModelKeyBytes = 256;      // "cuda:0/V1000-d64-ff256-L2-H4/fp32"
inline constexpr size_t kMaxArtifactNameBytes = 255;  // one path component (NAME_MAX)
inline constexpr size_t kMaxPageTokenBytes = 256;     // what EncodePageToken makes: < 100
inline constexpr size_t kMaxSweepFieldBytes = 64;     // "step.model.preset"
inline constexpr size_t kMaxSweepValueBytes = 64;     // "ATTENTION_IMPL_SDPA_EFFICIENT", a preset
// A cluster member's address ("gpu17.example.org:7531") and host name, as its
// heartbeat announces them (a DNS name is at most 253).
inline constexpr size_t kMaxNodeAddressBytes = 261;
// A string field of a request with no row below.
inline constexpr size_t kDefaultMaxStringBytes = 256;

// ---------------------------------------------------------------- lists

// Devices of one group or collective target (ranks); a node has far fewer.
inline constexpr int kMaxGroupDevices = 64;
// Devices one cluster member announces in its heartbeat (server/cluster):
// the coordinator refuses more, so no member can swell every node's ListNodes.
inline constexpr int kMaxNodeDevices = 64;
// Targets of one collective request (after folding group/devices/backends in).
inline constexpr int kMaxCollectiveTargets = 16;
// Runs of one memory sweep (context_lengths x modes x precisions), and so
// the length of each of those lists.
inline constexpr int64_t kMaxMemoryRuns = 64;
// A sweep (v1::SweepSpec): its axes, the values of one axis, and its cells
// (the product); each cell is one worker run, so 1024 is hours of device time.
inline constexpr int kMaxSweepAxes = 6;
inline constexpr int kMaxSweepValues = 32;
inline constexpr int64_t kMaxSweepCells = 1024;
// A list field of a request with no row below.
inline constexpr int kDefaultMaxListLength = 64;

// ---------------------------------------------------------------- numbers

// One benchmark request's; beyond them a request is a typo, not a plan.
inline constexpr int64_t kMaxSteps = 100000;
inline constexpr int64_t kMaxBatch = 1 << 16;
inline constexpr int64_t kMaxContext = 1 << 20;
// export_parity writes every weight in fp32 to one file: 8 GB at this limit.
inline constexpr int64_t kMaxParityParameters = 2'000'000'000;
// The memory request's (v1::MemorySpec).
inline constexpr int64_t kMaxMemoryRecordSteps = 100;
inline constexpr int64_t kMinMemoryMaxEntries = 1000;
inline constexpr int64_t kMaxMemoryMaxEntries = 10000000;
inline constexpr int64_t kMaxMemoryTopAllocations = 1000;
// The profile request's (v1::ProfileSpec).
inline constexpr int64_t kMaxProfileSteps = 100;
// The attention request's (v1::AttentionSpec). Each size alone, then the two
// products that decide memory: one score matrix (B·H·T² elements: 64 GiB in
// fp32 at this bound, 8x the course's largest cell, batch 8 x 16384²) and one
// of Q, K, V (B·H·T·d), so no request makes a worker try an absurd allocation.
inline constexpr int64_t kMaxAttentionBatch = 4096;
inline constexpr int64_t kMaxAttentionHeads = 1024;
inline constexpr int64_t kMaxAttentionHeadDim = 1024;
inline constexpr int64_t kMaxAttentionWarmupPasses = 10000;
inline constexpr int64_t kMaxAttentionScoreElements = int64_t{1} << 34;
inline constexpr int64_t kMaxAttentionInputElements = int64_t{1} << 32;
inline constexpr int64_t kMinAttentionMemoryCapBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxAttentionMemoryCapBytes = int64_t{1} << 50;
// The precision request's (v1::PrecisionSpec): the accumulation loop is one
// small tensor op per addition (a kernel launch each on a GPU), so a million
// is seconds; the addend must be finite in fp16 (65504, its largest value).
inline constexpr int64_t kMaxPrecisionCount = 1000000;
inline constexpr double kMaxPrecisionAddend = 65504;
// The collective request's (the bytes and sizes: common/collective_math.h).
inline constexpr int64_t kMaxCollectiveFactor = 1024;
inline constexpr int64_t kMaxCollectiveWarmupIters = 10000;
inline constexpr int64_t kMaxCollectiveIters = 100000;
// Each degree of an estimate's sharding (data, tensor, pipeline parallel):
// more devices than any cluster has is a typo.
inline constexpr int64_t kMaxParallelDegree = 1 << 20;
// The largest figure an estimate reports (2^62 bytes, 4 EiB): past it the
// request is refused rather than have a term overflow.
inline constexpr int64_t kMaxEstimateBytes = int64_t{1} << 62;
// Any timeout in seconds (collective, group, progress deadline): a day.
inline constexpr double kMaxTimeoutSeconds = 86400;

// ---------------------------------------------------------------- the tables

struct FieldLimit {
  absl::string_view field;  // full proto name
  int64_t max;              // bytes of a string (each element of a list), or entries of a list
  absl::string_view what;   // what the field takes, for the error
};

inline constexpr FieldLimit kStringLimits[] = {
    {"benchd.v1.JobSpec.device", kMaxDeviceNameBytes, "a device name such as cuda:0"},
    {"benchd.v1.ModelConfig.preset", kMaxPresetNameBytes, "a preset name such as small"},
    {"benchd.v1.AttentionSpec.preset", kMaxPresetNameBytes, "a preset name such as leaderboard"},
    {"benchd.v1.CollectiveSpec.group", kMaxGroupIdBytes, "a group id such as g1"},
    {"benchd.v1.CollectiveSpec.devices", kMaxDeviceNameBytes, "a device name such as cuda:0"},
    {"benchd.v1.CollectiveTarget.group", kMaxGroupIdBytes, "a group id such as g1"},
    {"benchd.v1.CollectiveTarget.devices", kMaxDeviceNameBytes, "a device name such as cuda:0"},
    {"benchd.v1.WatchRequest.job_id", kMaxJobIdBytes, "a job id such as 42"},
    {"benchd.v1.GetJobRequest.job_id", kMaxJobIdBytes, "a job id such as 42"},
    {"benchd.v1.CancelJobRequest.job_id", kMaxJobIdBytes, "a job id such as 42"},
    {"benchd.v1.ListArtifactsRequest.job_id", kMaxJobIdBytes, "a job id such as 42"},
    {"benchd.v1.FetchArtifactRequest.job_id", kMaxJobIdBytes, "a job id such as 42"},
    {"benchd.v1.FetchArtifactRequest.name", kMaxArtifactNameBytes,
     "an artifact name as ListArtifacts gives it"},
    {"benchd.v1.ListJobsRequest.page_token", kMaxPageTokenBytes,
     "a ListJobs reply's next_page_token"},
    {"benchd.v1.ListJobsRequest.device", kMaxDeviceNameBytes, "a device name such as cuda:0"},
    {"benchd.v1.ListModelsRequest.device", kMaxDeviceNameBytes, "a device name such as cuda:0"},
    {"benchd.v1.EvictModelRequest.key", kMaxModelKeyBytes, "a key as ListModels gives it"},
    {"benchd.v1.EvictModelRequest.device", kMaxDeviceNameBytes, "a device name such as cuda:0"},
    {"benchd.v1.CreateGroupRequest.devices", kMaxDeviceNameBytes, "a device name such as cuda:0"},
    {"benchd.v1.DestroyGroupRequest.group", kMaxGroupIdBytes, "a group id such as g1"},
    {"benchd.v1.SweepAxis.field", kMaxSweepFieldBytes, "a field path such as model.preset"},
    {"benchd.v1.SweepAxis.values", kMaxSweepValueBytes, "a value such as bf16 or 256"},
};

inline constexpr FieldLimit kListLimits[] = {
    {"benchd.v1.ProfileSpec.activities", 2, "cpu and cuda, each at most once"},
    {"benchd.v1.MemorySpec.context_lengths", kMaxMemoryRuns, "one entry per run of the sweep"},
    {"benchd.v1.MemorySpec.modes", kMaxMemoryRuns, "one entry per run of the sweep"},
    {"benchd.v1.MemorySpec.precisions", kMaxMemoryRuns, "one entry per run of the sweep"},
    {"benchd.v1.CollectiveSpec.devices", kMaxGroupDevices, "one device per rank"},
    {"benchd.v1.CollectiveSpec.backends", kMaxCollectiveTargets, "one target per backend"},
    {"benchd.v1.CollectiveSpec.targets", kMaxCollectiveTargets, "targets of one request"},
    {"benchd.v1.CollectiveSpec.world_sizes", kMaxGroupDevices, "world sizes of one sweep"},
    {"benchd.v1.CollectiveSpec.sizes_bytes", kMaxCollectiveSizes, "sizes of one request"},
    {"benchd.v1.CollectiveTarget.devices", kMaxGroupDevices, "one device per rank"},
    {"benchd.v1.CreateGroupRequest.devices", kMaxGroupDevices, "one device per rank"},
    {"benchd.v1.SweepSpec.axes", kMaxSweepAxes, "axes of one sweep"},
    {"benchd.v1.SweepAxis.values", kMaxSweepValues, "values of one axis"},
    {"benchd.v1.PrecisionSpec.experiments", 2, "accumulation and autocast, each at most once"},
    {"benchd.v1.PrecisionSpec.autocast_dtypes", 2, "bf16 and fp16, each at most once"},
    // The enum lists: each value at most once (job_spec_test checks each
    // limit against its enum's count).
    {"benchd.v1.DdpSpec.variants", 5, "naive, flat, overlap, bucketed and reducer, each once"},
    {"benchd.v1.DdpSpec.bucket_mb", 32, "bucket sizes of one request"},
    {"benchd.v1.DdpSpec.optimizers", 3, "adamw, sharded_adamw and adamw_overlapped, each once"},
    {"benchd.v1.DdpSpec.gradient_compressions", 2, "none and bf16, each at most once"},
};

// The row for `full_name` in `table`, or null.
template <size_t N>
const FieldLimit* FindFieldLimit(const FieldLimit (&table)[N], absl::string_view full_name) {
  for (const FieldLimit& l : table) {
    if (l.field == full_name) return &l;
  }
  return nullptr;
}

// A client's string as an error quotes it: C-escaped (it may be anything)
// and, past kMaxQuotedBytes, cut with "..." and its length.
inline std::string QuotedForError(absl::string_view s) {
  if (s.size() <= kMaxQuotedBytes) return absl::StrCat("'", absl::CHexEscape(s), "'");
  return absl::StrCat("'", absl::CHexEscape(s.substr(0, kMaxQuotedBytes)), "'... (", s.size(),
                      " bytes)");
}

}  // namespace benchd

#endif  // BENCHD_COMMON_LIMITS_H_
