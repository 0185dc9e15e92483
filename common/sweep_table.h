// A sweep's rows as tables: the derived columns of each cell (speed-up
// against fp32, each phase's share of the step, tokens/s), each kind's
// value columns (read from a cell's own result), the outcome counts, and
// the pivot the write-ups print (rows one axis, columns another). Torch-free: the daemon fills the
// columns, benchctl and the tests read them with the same code.
#ifndef BENCHD_COMMON_SWEEP_TABLE_H_
#define BENCHD_COMMON_SWEEP_TABLE_H_

#include <functional>
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

// How a value column is shown (the table, the pivot and the progress line
// format it; client/sweep_view.cc): milliseconds, a rate or TFLOP/s (3
// significant digits), a ratio ("2.50x"), a share ("40.00%"), seconds,
// MiB, a plain number (6 significant digits).
enum class SweepFormat { kMs, kRate, kRatio, kShare, kSeconds, kMib, kNumber };

// One value column of a kind's sweep: the one source of what the table,
// `get --csv`, the pivot (`--value NAME`), the per-cell progress line and
// the Python client's SweepResult.to_pandas() show for a cell (the Python
// client mirrors these tables: client/python/benchd/_results.py, checked
// against `benchctl get --csv` by its tests).
struct SweepColumn {
  std::string name;    // --value, the pivot, to_pandas(): "median_step_ms"
  std::string header;  // the table's ("step ms"); "" = not in the table
  std::string csv;     // the CSV's header, SI units ("median_step_s")
  double scale = 1;    // the column's value = the CSV's value x scale (s -> ms: 1e3)
  SweepFormat format = SweepFormat::kNumber;
  // The progress line's text, "{}" for the value as the table shows it
  // ("median step {} ms"); "" = not in the line.
  std::string line;
  // The cell's value in the CSV's unit; unset when the cell has none (a cell
  // that did not succeed, a figure not measured on this device).
  std::function<std::optional<double>(const v1::SweepCell&)> read;
  bool integer = false;  // a count (bytes): the CSV prints it as an integer

  std::optional<double> Csv(const v1::SweepCell& cell) const { return read(cell); }
  std::optional<double> Value(const v1::SweepCell& cell) const {
    const std::optional<double> v = read(cell);
    return v ? std::optional<double>(*v * scale) : std::nullopt;
  }
};

// A kind's value columns: in the table's and the CSV's order (every kind's
// last is wall_seconds), and the progress line's, in its order.
struct SweepColumns {
  std::vector<SweepColumn> columns;
  std::vector<std::string> line;
  // Null for a name that is not one of the columns.
  const SweepColumn* Find(absl::string_view name) const;
  std::vector<std::string> Names() const;
  // The pivot's default --value: median_step_ms where the kind has it (a
  // benchmark's, a profile's, an attention's fwd+bwd), else the first.
  const SweepColumn& Default() const;
};

// The kind a sweep's cells are: the request's kind, benchmark when unset.
// From a result or a cell alone: the cells' requests (else their results).
v1::JobSpec::KindCase SweepKind(const v1::JobSpec& spec);
v1::JobSpec::KindCase SweepKind(const v1::SweepResult& result);
v1::JobSpec::KindCase SweepKind(const v1::SweepCell& cell);
// "benchmark", "attention", ...
std::string SweepKindName(v1::JobSpec::KindCase kind);

// Each kind's columns (a kind that cannot sweep: wall_seconds only).
//   benchmark: median_step_ms, tokens_per_second, speedup_vs_fp32,
//     forward_share, backward_share, optimizer_share (the derived columns
//     above), peak_memory_mib, wall_seconds.
//   profile: the benchmark's of its unprofiled run, and profiler_overhead
//     (profiled / unprofiled median step) before wall_seconds.
//   attention: median_forward_ms, median_backward_ms, median_step_ms
//     (forward + backward per pass), flash_forward_tflops,
//     flash_backward_tflops, flash_step_tflops (FlashAttention's FLOP count:
//     causal halved, backward 2.5x the forward), saved_activation_mib,
//     peak_pass_mib (measured: CUDA only), saved_by_formula_mib,
//     score_matrix_mib, wall_seconds.
//   memory: peak_allocated_mib, peak_reserved_mib, baseline_allocated_mib,
//     max_memory_allocated_mib (the largest over the cell's runs that fit),
//     wall_seconds.
//   precision: fp32_result, fp16_result, mixed_result, mixed_cast_result
//     (each accumulation loop's sum), their *_relative_error, bf16_loss,
//     fp16_loss (the ToyModel's under each autocast dtype), wall_seconds.
const SweepColumns& SweepColumnsOf(v1::JobSpec::KindCase kind);

// The value columns a table or pivot can show, and a cell's value in one
// (unset when the cell has none); INVALID_ARGUMENT listing the kind's
// columns for another name. Without a kind: the cell's (its request's).
const std::vector<std::string>& SweepValueColumns();  // a benchmark's
std::vector<std::string> SweepValueColumns(v1::JobSpec::KindCase kind);
absl::StatusOr<std::optional<double>> SweepCellValue(const v1::SweepCell& cell,
                                                     absl::string_view column);
absl::StatusOr<std::optional<double>> SweepCellValue(v1::JobSpec::KindCase kind,
                                                     const v1::SweepCell& cell,
                                                     absl::string_view column);
// The column itself, or that INVALID_ARGUMENT.
absl::StatusOr<const SweepColumn*> FindSweepColumn(v1::JobSpec::KindCase kind,
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
// sweep's axes (listing them), the same field twice, a column that is not
// one of the kind's (listing them). Without a kind: the cells' (SweepKind).
absl::StatusOr<SweepPivot> PivotSweep(const v1::SweepSpec& sweep, const v1::SweepResult& result,
                                      absl::string_view row_field, absl::string_view column_field,
                                      absl::string_view value_column);
absl::StatusOr<SweepPivot> PivotSweep(v1::JobSpec::KindCase kind, const v1::SweepSpec& sweep,
                                      const v1::SweepResult& result, absl::string_view row_field,
                                      absl::string_view column_field,
                                      absl::string_view value_column);

}  // namespace benchd

#endif  // BENCHD_COMMON_SWEEP_TABLE_H_
