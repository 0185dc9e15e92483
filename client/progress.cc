#include "client/progress.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "absl/strings/str_join.h"
#include "client/format.h"
#include "common/stats.h"

namespace benchd::client {
namespace {

constexpr int kBarWidth = 20;

std::string Bar(int64_t done, int64_t total) {
  int filled =
      total > 0 ? static_cast<int>(kBarWidth * std::clamp<int64_t>(done, 0, total) / total) : 0;
  return "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "]";
}

}  // namespace

bool IsTerminal(const v1::JobEvent& e) {
  switch (e.event_case()) {
    case v1::JobEvent::kResult:
    case v1::JobEvent::kFailed:
    case v1::JobEvent::kCancelled:
    case v1::JobEvent::kInterrupted:
      return true;
    default:
      return false;
  }
}

const v1::Job& TerminalJob(const v1::JobEvent& e) {
  switch (e.event_case()) {
    case v1::JobEvent::kResult:
      return e.result();
    case v1::JobEvent::kFailed:
      return e.failed();
    case v1::JobEvent::kCancelled:
      return e.cancelled();
    case v1::JobEvent::kInterrupted:
      return e.interrupted();
    default:
      return v1::Job::default_instance();
  }
}

std::string FitToWidth(const std::string& line, int width) {
  // One column spare: writing the last column makes some terminals wrap.
  if (width <= 1 || static_cast<int>(line.size()) < width) return line;
  return line.substr(0, width - 1);
}

Progress::Progress(std::string job_id) : job_id_(std::move(job_id)) {}

void Progress::Observe(const v1::JobEvent& e) {
  switch (e.event_case()) {
    case v1::JobEvent::kQueued:
      phase_ = Phase::kQueued;
      break;
    case v1::JobEvent::kStarted:
      phase_ = Phase::kStarted;
      device_ = absl::StrJoin(e.started().devices(), ",");
      break;
    case v1::JobEvent::kWarmupStep:
    case v1::JobEvent::kStep: {
      const bool warmup = e.event_case() == v1::JobEvent::kWarmupStep;
      const v1::StepEvent& s = warmup ? e.warmup_step() : e.step();
      const Phase phase = warmup ? Phase::kWarmup : Phase::kMeasure;
      if (phase != phase_) phase_seconds_.clear();
      phase_ = phase;
      step_ = s.timing().index() + 1;
      total_ = s.total_steps();
      last_seconds_ = s.timing().step_seconds();
      phase_seconds_.push_back(last_seconds_);
      break;
    }
    default:
      if (IsTerminal(e)) {
        phase_ = Phase::kDone;
        terminal_ = true;
      }
      break;
  }
}

std::string Progress::BarLine() const {
  switch (phase_) {
    case Phase::kWaiting:
      return fmt::format("{}  waiting for events", job_id_);
    case Phase::kQueued:
      return fmt::format("{}  queued", job_id_);
    case Phase::kStarted:
      return fmt::format("{}  running{}", job_id_, device_.empty() ? "" : " on " + device_);
    case Phase::kWarmup:
    case Phase::kMeasure: {
      const int width = static_cast<int>(std::to_string(total_).size());
      return fmt::format("{}  {:<7} {:>{}}/{} {}  last {} ms  median {} ms", job_id_,
                         phase_ == Phase::kWarmup ? "warm-up" : "measure", step_, width, total_,
                         Bar(step_, total_), FormatMs(last_seconds_),
                         FormatMs(ComputeStats(phase_seconds_).median()));
    }
    case Phase::kDone:
      return fmt::format("{}  done", job_id_);
  }
  return job_id_;
}

std::string Progress::PlainLine(const v1::JobEvent& e) const {
  switch (e.event_case()) {
    case v1::JobEvent::kQueued:
      return fmt::format("job {} queued", job_id_);
    case v1::JobEvent::kStarted:
      return fmt::format(
          "job {} started{}", job_id_,
          e.started().devices().empty() ? "" : " on " + absl::StrJoin(e.started().devices(), ","));
    case v1::JobEvent::kWarmupStep:
    case v1::JobEvent::kStep: {
      // Called after Observe, so the counters include this step.
      return fmt::format("{} {}/{}  step {} ms  median {} ms",
                         e.event_case() == v1::JobEvent::kWarmupStep ? "warm-up" : "measure", step_,
                         total_, FormatMs(last_seconds_),
                         FormatMs(ComputeStats(phase_seconds_).median()));
    }
    case v1::JobEvent::kLog:
      return e.log();
    default:
      return "";
  }
}

}  // namespace benchd::client
