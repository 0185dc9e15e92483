#include "client/format.h"

#include <cmath>
#include <ctime>
#include <vector>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/job_spec.h"

namespace benchd::client {

std::string FormatThousands(int64_t value) {
  // Work on the magnitude as unsigned so INT64_MIN does not overflow.
  const bool negative = value < 0;
  uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

std::string FormatMs(double seconds) { return fmt::format("{:.3f}", seconds * 1e3); }

std::string FormatSeconds(double seconds) { return fmt::format("{:.2f} s", seconds); }

std::string FormatGiB(int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(value) >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

std::string FormatPercent(double ratio) { return fmt::format("{:.2f}%", ratio * 100.0); }

std::string FormatRate(double value) {
  if (!std::isfinite(value)) return fmt::format("{}", value);
  if (std::fabs(value) >= 100.0) return FormatThousands(static_cast<int64_t>(std::llround(value)));
  if (value == 0.0) return "0";
  // 3 significant digits, but never scientific notation for small rates.
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  const int decimals = std::max(0, 2 - magnitude);
  return fmt::format("{:.{}f}", value, decimals);
}

std::string FormatTime(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  const std::time_t secs = static_cast<std::time_t>(t.seconds());
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

double SecondsBetween(const google::protobuf::Timestamp& a, const google::protobuf::Timestamp& b) {
  const bool a_unset = a.seconds() == 0 && a.nanos() == 0;
  const bool b_unset = b.seconds() == 0 && b.nanos() == 0;
  if (a_unset || b_unset) return -1.0;
  return static_cast<double>(b.seconds() - a.seconds()) + (b.nanos() - a.nanos()) * 1e-9;
}

std::string CodeName(int code) {
  if (code < 0 || code > 16) return fmt::format("CODE_{}", code);
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

std::string StateName(v1::JobState state) {
  if (state == v1::JOB_STATE_UNSPECIFIED) return "UNKNOWN";
  return std::string(absl::StripPrefix(v1::JobState_Name(state), "JOB_STATE_"));
}

std::string WorkerStateName(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_STARTING:
      return "starting";
    case v1::WORKER_STATE_UP:
      return "up";
    case v1::WORKER_STATE_DOWN:
      return "down";
    case v1::WORKER_STATE_UNRESPONSIVE:
      return "unresponsive";
    case v1::WORKER_STATE_PARKED:
      return "parked";
    default:
      return "-";
  }
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::string JobKindText(const v1::Job& job) {
  return OrDash(
      JobKindName(job.kind() == v1::JOB_KIND_UNSPECIFIED ? JobKindOf(job.spec()) : job.kind()));
}

std::string ChoicesText(const std::vector<std::string>& choices) {
  if (choices.size() < 2) return absl::StrJoin(choices, "");
  return absl::StrJoin(choices.begin(), choices.end() - 1, ", ") + " or " + choices.back();
}

std::string JobDevicesText(const v1::Job& job) {
  if (job.devices().empty()) return OrDash(job.spec().device());
  return absl::StrJoin(job.devices(), ",");
}

std::string FormatVersions(const v1::Versions& v) {
  std::vector<std::string> parts;
  if (!v.benchd().empty()) parts.push_back("benchd " + v.benchd());
  if (!v.torch().empty()) parts.push_back("torch " + v.torch());
  if (!v.cuda_runtime().empty()) {
    std::string cuda = "CUDA " + v.cuda_runtime();
    if (!v.cuda_driver().empty()) cuda += " (driver " + v.cuda_driver() + ")";
    parts.push_back(cuda);
  } else if (!v.cuda_driver().empty()) {
    parts.push_back("CUDA driver " + v.cuda_driver());
  }
  if (!v.cudnn().empty()) parts.push_back("cuDNN " + v.cudnn());
  if (!v.nccl().empty()) parts.push_back("NCCL " + v.nccl());
  if (parts.empty()) return "-";
  return absl::StrJoin(parts, ", ");
}

}  // namespace benchd::client
