// A sweep's rows as tables: the derived columns of each cell (speed-up
// against fp32, each phase's share of the step, tokens/s), the outcome
// counts, and the pivot the write-ups print (rows one axis, columns
// another). Torch-free: the daemon fills the columns, benchctl and the
// tests read them with the same code.
#ifndef BENCHD_COMMON_SWEEP_TABLE_H_
#define BENCHD_COMMON_SWEEP_TABLE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "benchd/v1/bench.pb.h"

namespace benchd {

// "ok", "out_of_memory", "timeout", "failed" ("unspecified" for 0).
std::string SweepOutcomeName(v1::SweepCellOutcome outcome);

// The benchmark run of a cell's result: the benchmark itself, or a
// profile's unprofiled run; null for other kinds or a cell without result.
const v1::BenchmarkResult* CellBenchmark(const v1::SweepCell& cell);

// Sets every cell's derived columns from the cells in `result` (so a cell
// streamed before its fp32 partner ran has no speed-up yet; the stored
// result has them all) and the outcome counts. `sweep` is the job's.
//   median_step_seconds, tokens_per_second: the worker's (median step over
//     the measured steps; batch x context / that median).
//   speedup_vs_fp32: the median step of the OK cell whose values are this
//     cell's with the precision axis (a field of enum type Precision) at
//     fp32, over this cell's; unset without such an axis or cell.
//   forward/backward/optimizer_share: the phase's mean over the step's mean,
//     for the phases the mode runs (forward; + backward; + optimizer in
//     train_step) when the worker timed them (not inside a CUDA graph).
void DeriveSweepColumns(const v1::SweepSpec& sweep, v1::SweepResult* result);

// The value columns a table or pivot can show, and a cell's value in one
// (unset when the cell has none).
const std::vector<std::string>& SweepValueColumns();
absl::StatusOr<std::optional<double>> SweepCellValue(const v1::SweepCell& cell,
                                                     absl::string_view column);

// A pivot: rows are the values of one axis (with the values of any axis
// that is neither the rows' nor the columns', as "value (field=v, ...)"),
// columns the values of another, each in the order they ran.
struct SweepPivot {
  std::string row_field, column_field, value_column;
  std::vector<std::string> row_labels, column_labels;
  struct Entry {
    bool present = false;  // a cell ran for this row and column
    v1::SweepCellOutcome outcome = v1::SWEEP_CELL_OUTCOME_UNSPECIFIED;
    std::optional<double> value;
  };
  std::vector<std::vector<Entry>> entries;  // [row][column]
};

// INVALID_ARGUMENT naming what is wrong: a field that is not one of the
// sweep's axes (listing them), the same field twice, an unknown column.
absl::StatusOr<SweepPivot> PivotSweep(const v1::SweepSpec& sweep, const v1::SweepResult& result,
                                      absl::string_view row_field, absl::string_view column_field,
                                      absl::string_view value_column);

}  // namespace benchd

#endif  // BENCHD_COMMON_SWEEP_TABLE_H_
