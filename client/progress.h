// Follows a job's event stream for `watch`: the live single-line bar on a
// terminal, and plain lines when stdout is a pipe or file.
#ifndef BENCHD_CLIENT_PROGRESS_H_
#define BENCHD_CLIENT_PROGRESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"

namespace benchd::client {

class Progress {
 public:
  explicit Progress(std::string job_id);

  // Updates the counters from one event.
  void Observe(const v1::JobEvent& event);

  // The live line: "<id>  measure    8/15 [#####.....]  last 12.345 ms  median 12.300 ms".
  // The median is over the current phase's steps so far, so once measuring
  // it converges on the median the result will report.
  std::string BarLine() const;
  // The event as one log line for non-terminals; "" for events not worth a line.
  std::string PlainLine(const v1::JobEvent& event) const;

  bool terminal() const { return terminal_; }

 private:
  enum class Phase { kWaiting, kQueued, kStarted, kWarmup, kMeasure, kDone };

  std::string job_id_;
  Phase phase_ = Phase::kWaiting;
  std::string device_;
  int64_t step_ = 0;   // 1-based position over warm-up and measured steps
  int64_t total_ = 0;  // warm-up + measured
  double last_seconds_ = 0;
  std::vector<double> phase_seconds_;  // step times of the current phase
  bool terminal_ = false;
};

// Whether an event ends the stream (result, failed, cancelled, interrupted).
bool IsTerminal(const v1::JobEvent& event);
// The Job carried by a terminal event.
const v1::Job& TerminalJob(const v1::JobEvent& event);

// Fits a line to a terminal of `width` columns (no wrap, so '\r' redraws it).
std::string FitToWidth(const std::string& line, int width);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_PROGRESS_H_
