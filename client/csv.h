// CSV for spreadsheets and pandas: one row per step, durations in seconds.
#ifndef BENCHD_CLIENT_CSV_H_
#define BENCHD_CLIENT_CSV_H_

#include <string>

#include "benchd/v1/bench.pb.h"

namespace benchd::client {

inline constexpr const char* kStepsCsvHeader =
    "job_id,index,warmup,step_s,host_s,forward_s,backward_s,optimizer_s,loss";

// RFC 4180 quoting, only where a field needs it.
std::string CsvField(const std::string& s);
// The header, then one row per step of the job's benchmark result, or per
// pass of its attention result (none when the job has neither). Numbers print in shortest
// round-trip form, so no precision is lost.
std::string StepsCsv(const v1::Job& job);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_CSV_H_
