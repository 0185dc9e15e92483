// `benchctl submit precision`: its flags as a JobSpec, and the result's view.
#ifndef BENCHD_CLIENT_PRECISION_VIEW_H_
#define BENCHD_CLIENT_PRECISION_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::client {

// Unset flags stay unset so the daemon's defaults apply (both experiments,
// autocast bf16 and fp16, 0.01 added 1000 times, seed 0).
struct PrecisionOptions {
  std::string device;
  std::string experiments;      // --experiments accumulation,autocast
  std::string autocast_dtypes;  // --autocast-dtypes bf16,fp16
  std::optional<int64_t> count;
  std::optional<double> addend;
  std::optional<uint64_t> seed;
};

// INVALID_ARGUMENT naming the flag (--experiments, --autocast-dtypes) for
// what benchctl can tell by itself; the daemon checks the rest.
absl::StatusOr<v1::JobSpec> BuildPrecisionSpec(const PrecisionOptions& options);

// "accumulation (0.01 x 1000), autocast bf16, fp16".
std::string PrecisionSpecSummary(const v1::PrecisionSpec& spec);

// The accumulation table (a row per loop: accumulator and addend dtypes,
// result, exact value, absolute and relative error) and the autocast table
// (a row per tensor, a column per autocast dtype: the dtypes as torch gave
// them), then the device.
std::string PrecisionResultView(const v1::PrecisionResult& result);

// The two tables as CSV: the accumulation rows
// (kPrecisionAccumulationCsvHeader), a blank line, then one row per tensor of
// each autocast run (kPrecisionAutocastCsvHeader). Numbers in shortest
// round-trip form.
inline constexpr const char* kPrecisionAccumulationCsvHeader =
    "job_id,name,accumulator_dtype,addend_dtype,addend_cast,addend_value,result,exact,"
    "absolute_error,relative_error";
inline constexpr const char* kPrecisionAutocastCsvHeader =
    "job_id,autocast_dtype,autocast_device_type,tensor,role,dtype";
std::string PrecisionCsv(const v1::Job& job);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_PRECISION_VIEW_H_
