// Times the phases of one step: Mark() at each boundary, then, once the step
// has synchronized, Seconds(i, j) between boundaries i and j. On a GPU the
// marks are CUDA events on the current stream (device time, independent of
// how far ahead the host ran); on the CPU they are host steady-clock reads.
#ifndef BENCHD_WORKER_PHASE_CLOCK_H_
#define BENCHD_WORKER_PHASE_CLOCK_H_

#include <memory>

#include "worker/device.h"

namespace benchd::worker {

class PhaseClock {
 public:
  virtual ~PhaseClock() = default;
  // Forgets the previous step's marks.
  virtual void Reset() = 0;
  // Records the next boundary (0, 1, ...).
  virtual void Mark() = 0;
  // Seconds from boundary `from` to boundary `to`; valid after the device synchronized.
  virtual double Seconds(int from, int to) = 0;
  // "cuda_event" or "host_steady_clock", as BenchmarkResult.timer reports it.
  virtual const char* name() const = 0;
};

// A clock for `device` with room for `max_marks` boundaries per step.
std::unique_ptr<PhaseClock> MakePhaseClock(const WorkerDevice& device, int max_marks);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_PHASE_CLOCK_H_
