// Human-readable views of one job: `get`'s report and the one-line summaries
// that `list` and `watch` print.
#ifndef BENCHD_CLIENT_JOB_VIEW_H_
#define BENCHD_CLIENT_JOB_VIEW_H_

#include <string>

#include "benchd/v1/bench.pb.h"
#include "client/profile_view.h"

namespace benchd::client {

// "small (vocab 10,000, d_model 768, d_ff 3,072, 12 layers, 12 heads, rope theta 10000)".
std::string ModelSummary(const v1::ModelConfig& model);
// Every set field of the spec on one line.
std::string SpecSummary(const v1::JobSpec& spec);
// Compact, for list: "small train_step bf16 4x128".
std::string ShortSpecSummary(const v1::JobSpec& spec);

// Rows step/forward/backward/optimizer/host_step (those that were measured),
// columns median, mean, std, min, max, p95 in ms and cv in percent.
std::string StatsTable(const v1::BenchmarkResult& result, const std::string& indent = "");
// One row per step: index, warm-up flag, step/fwd/bwd/opt ms, loss.
std::string StepsTable(const v1::BenchmarkResult& result, const std::string& indent = "");
// Config, statistics, throughput, memory, versions and steps.
std::string BenchmarkResultView(const v1::BenchmarkResult& result);
// `benchctl get`: state, times, spec, error or result.
std::string JobView(const v1::Job& job, const ProfileViewOptions& profile = {});
// What `watch` prints when the job ends: "job X succeeded: median step ...".
std::string FinalStateLine(const v1::Job& job);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_JOB_VIEW_H_
