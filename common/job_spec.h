// Checks a JobSpec and fills its defaults. The daemon calls this at Submit (so
// bad input is refused before it is queued) and the worker again at Run (so it
// never trusts its caller).
#ifndef BENCHD_COMMON_JOB_SPEC_H_
#define BENCHD_COMMON_JOB_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "benchd/v1/bench.pb.h"
#include "common/limits.h"
#include "google/protobuf/message.h"

namespace benchd {

// The limits (kMaxSteps, kMaxBatch, ...) are in common/limits.h.

// The memory request's defaults (v1::MemorySpec).
inline constexpr int64_t kDefaultMemoryRecordSteps = 2;
inline constexpr int64_t kDefaultMemoryMaxEntries = 100000;
inline constexpr int64_t kDefaultMemoryTopAllocations = 10;

// The profile request's (v1::ProfileSpec).
inline constexpr int64_t kDefaultProfileSteps = 3;

// The attention request's (v1::AttentionSpec): the course's batch and pass
// count; head_dim and seq_len are the middle of its grid.
inline constexpr int64_t kDefaultAttentionBatch = 8;
inline constexpr int64_t kDefaultAttentionHeadDim = 64;
inline constexpr int64_t kDefaultAttentionSeqLen = 1024;
inline constexpr int64_t kDefaultAttentionWarmupPasses = 5;
inline constexpr int64_t kDefaultAttentionPasses = 100;
// AttentionSpec.preset: the CS336 FlashAttention leaderboard's case.
inline constexpr const char* kAttentionLeaderboardPreset = "leaderboard";

// The precision request's (v1::PrecisionSpec): the write-up's loop, 0.01
// added 1000 times.
inline constexpr int64_t kDefaultPrecisionCount = 1000;
inline constexpr double kDefaultPrecisionAddend = 0.01;

// The request's kind (the JobSpec oneof's case); unspecified when none is set.
v1::JobKind JobKindOf(const v1::JobSpec& spec);
// Every request kind, in the proto's order (JobKind but UNSPECIFIED): the one
// list behind help texts, list filters, progress deadlines and messages, so
// a kind added to the proto shows up in all of them (JobKindsTest).
const std::vector<v1::JobKind>& JobKinds();
// "benchmark", "profile", ..., "ddp" (the enum's name, lower case, without
// JOB_KIND_), or "" for unspecified and unknown values.
std::string JobKindName(v1::JobKind kind);
std::string JobKindName(const v1::JobSpec& spec);
std::vector<std::string> JobKindNames();  // of JobKinds()
// "benchmark, profile, ... or ddp".
std::string JobKindChoices();
// A kind's name (any case) or full enum name; INVALID_ARGUMENT "unknown kind
// '...'; expected <JobKindChoices()>".
absl::StatusOr<v1::JobKind> ParseJobKind(const std::string& name);

// "accumulation", "autocast" (v1::PrecisionExperiment), and back (also the
// full enum names); INVALID_ARGUMENT "unknown experiment '...'; expected ...".
std::string PrecisionExperimentName(v1::PrecisionExperiment e);
absl::StatusOr<v1::PrecisionExperiment> ParsePrecisionExperiment(const std::string& name);

// Returns the spec with every default written out (mode, precision, batch 4,
// context 128, warm-up 5 — or with warmup_auto no count and a cap of 50 —,
// measured steps 10, the model resolved), or INVALID_ARGUMENT naming the field
// (the options' checks: common/options.h).
// The device is not checked here: only the daemon knows its devices.
// With a sweep (common/sweep_spec.h) every cell must resolve, and the spec
// comes back as given: each cell is resolved when it runs.
absl::StatusOr<v1::JobSpec> ResolveJobSpec(const v1::JobSpec& spec);

// The benchmark request alone (ResolveJobSpec's part for JobSpec.benchmark):
// every default written out, or INVALID_ARGUMENT naming "benchmark.<field>".
// Requests that embed a step (memory, profile, ddp) rename the prefix.
absl::StatusOr<v1::BenchmarkSpec> ResolveBenchmark(const v1::BenchmarkSpec& in);

// A devices target of a collective or data-parallel request: 2+ device
// names of one kind, each once; the backend written out (nccl on cuda, gloo
// on cpu) and checked against the devices. INVALID_ARGUMENT naming
// "<where>.devices" or "<where>.backend".
absl::Status ResolveDevicesTarget(const std::string& where, v1::CollectiveTarget* t);

// The runs of a resolved memory request, in sweep order (context lengths,
// then modes, then precisions), each a benchmark step with measure_steps =
// record_steps. `step` is the request's resolved step.
std::vector<v1::BenchmarkSpec> MemoryRunSpecs(const v1::MemorySpec& memory,
                                              const v1::BenchmarkSpec& step);
// "ctx128-train_step-bf16".
std::string MemoryRunName(const v1::BenchmarkSpec& cell);

// The series of a resolved collective request in the order they run: every
// target at every world size of collective.world_sizes (the first w devices;
// a group target as it is), backends in the order given.
std::vector<v1::CollectiveTarget> CollectiveSeries(const v1::CollectiveSpec& collective);

// Every device a resolved collective request touches, sorted and unique
// ("cpu:0", "cpu:1", ...); group targets contribute nothing (the daemon knows
// their devices).
std::vector<std::string> CollectiveDevices(const v1::CollectiveSpec& collective);

// FAILED_PRECONDITION when the kind cannot run on that device at all (memory
// on a CPU); INVALID_ARGUMENT naming the field when a benchmark step's option
// cannot run there (CheckStepOptionsForDevice), or an attention request's
// implementation (CheckAttentionImplForDevice) or memory cap (CUDA only). The daemon calls it at
// Submit with the resolved device name. A sweep's cells are checked each, the
// first refused named ("sweep cell 2 (precision=fp32): ...").
absl::Status CheckKindForDevice(const v1::JobSpec& spec, const std::string& device);

// INVALID_ARGUMENT naming the field (`prefix` + "cuda_graph", "attention")
// when `device` ("cpu:0", "cuda:1") cannot honour an option of the resolved
// step: cuda_graph on a CPU; efficient, cudnn or fused attention on a CPU
// (CUDA kernels; flash and math have CPU kernels); flash or cudnn attention in
// fp32 on CUDA (fp16/bf16 kernels only); fused attention with a head dim
// (d_model / num_heads) other than 16, 32, 64 or 128. The same rule as the
// worker's CheckOptionsForDevice (worker/job_options.cc), from the device's name.
absl::Status CheckStepOptionsForDevice(const v1::BenchmarkSpec& step, const std::string& device,
                                       absl::string_view prefix = "benchmark.");

// The attention rule inside CheckStepOptionsForDevice, for any request that
// picks an implementation (`field` names it: "benchmark.attention",
// "attention.implementation"): efficient, cudnn and fused need CUDA; flash and
// cudnn refuse fp32 on CUDA; fused (benchd's kernels, which run fp32 too)
// refuses head dims other than 16, 32, 64 and 128. INVALID_ARGUMENT naming
// `field`.
absl::Status CheckAttentionImplForDevice(v1::AttentionImpl attention, v1::Precision precision,
                                         int64_t head_dim, const std::string& device,
                                         absl::string_view field);

// The one range check of every integer field of a request: INVALID_ARGUMENT
// "<field>: expected lo..hi, got value".
absl::Status CheckRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi);

// INVALID_ARGUMENT "<prefix><path>: expected a finite number, got inf" for
// the first float or double field of `message` (nested messages and repeated
// fields included, found through its descriptor) that is NaN or +-inf. Every
// request boundary calls it once on the whole request: ResolveJobSpec on the
// JobSpec, the daemon's CreateGroup on its request.
absl::Status CheckFiniteNumbers(const google::protobuf::Message& message,
                                absl::string_view prefix = "");

// INVALID_ARGUMENT naming the field ("<prefix><path>", "collective.devices[3]")
// for the first string of `message` longer than its limit, list with more
// entries than its limit (common/limits.h's tables, found through the
// descriptor: nested messages and lists included), or unknown field (a field
// this build does not know, which it would neither run nor keep honestly). The
// message says what came (a string quoted and cut short) and what is accepted.
// Every request boundary calls it first, before anything echoes a field: the
// JobSpec (ResolveJobSpec), CreateGroup (GroupRegistry::CheckRequest), and the
// service's other calls on their whole request.
absl::Status CheckSizeLimits(const google::protobuf::Message& message,
                             absl::string_view prefix = "");

// A timeout in seconds as requests give it: 0 = the default (300 s), else
// 1..86400; anything else (negative, NaN, inf, 0.5, beyond a day) is
// INVALID_ARGUMENT "<field>: expected 0 (= 300) or 1..86400, got -1". Returns
// the timeout to use.
absl::StatusOr<double> ResolveTimeoutSeconds(absl::string_view field, double value);

// The progress deadline of a job of this kind when neither the spec
// (progress_timeout_seconds) nor the daemon's configuration sets one: long
// enough for the slowest silent phase of each kind on a GPU (building an xl
// model, exporting a large profile trace or memory snapshot, one large
// collective size), short enough that a hung job does not hold a device for
// an hour.
double DefaultProgressTimeoutSeconds(const v1::JobSpec& spec);
double DefaultProgressTimeoutSeconds(v1::JobKind kind);
// The spec's own progress_timeout_seconds, or (0) the default for its kind.
double ProgressTimeoutSeconds(const v1::JobSpec& spec);

}  // namespace benchd

#endif  // BENCHD_COMMON_JOB_SPEC_H_
