// benchctl's side of a sweep (JobSpec.sweep): the --sweep and
// --cell-timeout flags into a SweepSpec, one line per cell as it finishes,
// the table of every cell, the write-up's pivot (--pivot ROWS,COLS --value
// COLUMN), and both as CSV. The figures come from common/sweep_table.h.
#ifndef BENCHD_CLIENT_SWEEP_VIEW_H_
#define BENCHD_CLIENT_SWEEP_VIEW_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::client {

// --sweep FIELD=V1,V2,... (repeatable, first outermost) and --cell-timeout
// SECONDS onto `spec` (whose kind is set). Each value is checked for the
// field here (INVALID_ARGUMENT naming --sweep, what came and what the field
// takes), so a typo is a usage error before any RPC.
absl::Status ApplySweepFlags(const std::vector<std::string>& sweeps,
                             std::optional<double> cell_timeout, v1::JobSpec* spec);

// `--pivot ROWS,COLS` and `--value COLUMN`: one of the kind's value columns
// (common/sweep_table.h SweepColumnsOf); "" = the kind's default
// (median_step_ms for a benchmark, a profile and an attention sweep, else
// the kind's first column).
struct PivotFlags {
  std::string pivot;  // "" = the table of every cell
  std::string value;
};

// "precision=fp32,bf16 x context_length=16,32 (4 cells, each at most 5 s)".
std::string SweepSummary(const v1::SweepSpec& sweep);
// "4 of 4 cells ran: 3 ok, 1 out of memory, 0 timed out, 0 failed".
std::string SweepCountsText(const v1::SweepResult& result);

// One line for a finished cell (watch's progress), with the figures of its
// kind's line columns: "cell 3/6 bf16 32: ok, median step 4.000 ms, 2.50x
// fp32, 128,000 tokens/s"; an attention cell's "fwd 1.234 ms, bwd ...".
std::string SweepCellLine(const v1::SweepCell& cell, int cells_total);

// Every cell: the axes' values, outcome, the kind's value columns that have
// a header (a benchmark's: median step ms, tokens/s, speed-up vs fp32,
// phase shares, wall seconds; an attention sweep's: fwd, bwd and fwd+bwd ms,
// their TFLOP/s, saved and peak MiB, wall), and the error of a row that has
// one. Without a kind: the cells' (SweepKind).
std::string SweepTable(const v1::SweepSpec& sweep, const v1::SweepResult& result);
std::string SweepTable(v1::JobSpec::KindCase kind, const v1::SweepSpec& sweep,
                       const v1::SweepResult& result);
// The same as CSV (header first; numbers in shortest round-trip form, SI
// units; empty where a cell has no value): job_id,index,<axes...>,outcome,
// <the kind's columns' CSV names>,error_code,error_message. A benchmark's:
// median_step_s,tokens_per_second,speedup_vs_fp32,forward_share,
// backward_share,optimizer_share,peak_memory_bytes,wall_seconds.
std::string SweepCsv(const v1::Job& job);

// The pivot as text (in the column's unit: milliseconds with 2 decimals, 3
// significant digits below 1 ms; a cell without a value shows its outcome:
// OOM, TIMEOUT, FAILED) or CSV (header "<rows>\\<cols>",<column values>...).
// INVALID_ARGUMENT for a --pivot that is not two axes of the sweep or a
// --value that is not one of the kind's columns (listing them).
absl::StatusOr<std::string> SweepPivotText(const v1::Job& job, const PivotFlags& flags, bool csv);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_SWEEP_VIEW_H_
