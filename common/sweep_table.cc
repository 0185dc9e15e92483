#include "common/sweep_table.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"

namespace benchd {
namespace {

// The index of the precision axis (its last field is of enum type
// Precision: "precision", "step.precision"), or -1.
int PrecisionAxis(const v1::SweepSpec& sweep) {
  for (int i = 0; i < sweep.axes_size(); ++i) {
    const std::vector<std::string> parts = absl::StrSplit(sweep.axes(i).field(), '.');
    if (!parts.empty() && parts.back() == "precision") return i;
  }
  return -1;
}

// The mode of a cell's step (benchmark or profile), forward when unknown.
v1::BenchmarkMode CellMode(const v1::SweepCell& cell) {
  const v1::BenchmarkResult* b = CellBenchmark(cell);
  return b ? b->spec().mode() : v1::BENCHMARK_MODE_FORWARD;
}

void ClearDerived(v1::SweepCell* c) {
  c->clear_median_step_seconds();
  c->clear_tokens_per_second();
  c->clear_speedup_vs_fp32();
  c->clear_forward_share();
  c->clear_backward_share();
  c->clear_optimizer_share();
}

}  // namespace

std::string SweepOutcomeName(v1::SweepCellOutcome outcome) {
  switch (outcome) {
    case v1::SWEEP_CELL_OUTCOME_OK:
      return "ok";
    case v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY:
      return "out_of_memory";
    case v1::SWEEP_CELL_OUTCOME_TIMEOUT:
      return "timeout";
    case v1::SWEEP_CELL_OUTCOME_FAILED:
      return "failed";
    default:
      return "unspecified";
  }
}

const v1::BenchmarkResult* CellBenchmark(const v1::SweepCell& cell) {
  if (cell.outcome() != v1::SWEEP_CELL_OUTCOME_OK) return nullptr;
  if (cell.result().has_benchmark()) return &cell.result().benchmark();
  if (cell.result().has_profile() && cell.result().profile().has_unprofiled()) {
    return &cell.result().profile().unprofiled();
  }
  return nullptr;
}

void DeriveSweepColumns(const v1::SweepSpec& sweep, v1::SweepResult* result) {
  result->clear_fields();
  for (const v1::SweepAxis& a : sweep.axes()) result->add_fields(a.field());
  int ok = 0, oom = 0, timeout = 0, failed = 0;
  for (v1::SweepCell& c : *result->mutable_cells()) {
    ClearDerived(&c);
    switch (c.outcome()) {
      case v1::SWEEP_CELL_OUTCOME_OK:
        ++ok;
        break;
      case v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY:
        ++oom;
        break;
      case v1::SWEEP_CELL_OUTCOME_TIMEOUT:
        ++timeout;
        break;
      default:
        ++failed;
    }
    const v1::BenchmarkResult* b = CellBenchmark(c);
    if (b == nullptr || b->step().count() == 0 || !(b->step().median() > 0)) continue;
    c.set_median_step_seconds(b->step().median());
    c.set_tokens_per_second(b->tokens_per_second());
    const double step_mean = b->step().mean();
    if (!(step_mean > 0)) continue;
    const v1::BenchmarkMode mode = CellMode(c);
    if (b->forward().count() > 0) c.set_forward_share(b->forward().mean() / step_mean);
    if (mode != v1::BENCHMARK_MODE_FORWARD && b->backward().count() > 0) {
      c.set_backward_share(b->backward().mean() / step_mean);
    }
    if (mode == v1::BENCHMARK_MODE_TRAIN_STEP && b->optimizer().count() > 0) {
      c.set_optimizer_share(b->optimizer().mean() / step_mean);
    }
  }
  result->set_cells_ok(ok);
  result->set_cells_out_of_memory(oom);
  result->set_cells_timeout(timeout);
  result->set_cells_failed(failed);

  const int p = PrecisionAxis(sweep);
  if (p < 0) return;
  // The fp32 cells' medians by the other axes' values.
  std::map<std::vector<std::string>, double> fp32;
  auto others = [p](const v1::SweepCell& c) {
    std::vector<std::string> key(c.values().begin(), c.values().end());
    if (p < static_cast<int>(key.size())) key.erase(key.begin() + p);
    return key;
  };
  for (const v1::SweepCell& c : result->cells()) {
    if (p < c.values_size() && c.values(p) == "fp32" && c.has_median_step_seconds()) {
      fp32[others(c)] = c.median_step_seconds();
    }
  }
  for (v1::SweepCell& c : *result->mutable_cells()) {
    if (!c.has_median_step_seconds()) continue;
    auto it = fp32.find(others(c));
    if (it != fp32.end()) c.set_speedup_vs_fp32(it->second / c.median_step_seconds());
  }
}

const std::vector<std::string>& SweepValueColumns() {
  static const auto* columns = new std::vector<std::string>{
      "median_step_ms", "tokens_per_second", "speedup_vs_fp32", "forward_share",
      "backward_share", "optimizer_share",   "peak_memory_mib", "wall_seconds"};
  return *columns;
}

absl::StatusOr<std::optional<double>> SweepCellValue(const v1::SweepCell& cell,
                                                     absl::string_view column) {
  using Opt = std::optional<double>;
  auto opt = [](bool has, double v) { return has ? Opt(v) : Opt(); };
  if (column == "median_step_ms") {
    return opt(cell.has_median_step_seconds(), cell.median_step_seconds() * 1e3);
  }
  if (column == "tokens_per_second")
    return opt(cell.has_tokens_per_second(), cell.tokens_per_second());
  if (column == "speedup_vs_fp32") return opt(cell.has_speedup_vs_fp32(), cell.speedup_vs_fp32());
  if (column == "forward_share") return opt(cell.has_forward_share(), cell.forward_share());
  if (column == "backward_share") return opt(cell.has_backward_share(), cell.backward_share());
  if (column == "optimizer_share") {
    return opt(cell.has_optimizer_share(), cell.optimizer_share());
  }
  if (column == "peak_memory_mib") {
    const v1::BenchmarkResult* b = CellBenchmark(cell);
    return opt(b != nullptr && b->peak_memory_bytes() > 0,
               b ? static_cast<double>(b->peak_memory_bytes()) / (1 << 20) : 0);
  }
  if (column == "wall_seconds") return Opt(cell.wall_seconds());
  return absl::InvalidArgumentError(absl::StrCat("unknown value column '", column,
                                                 "'; expected one of ",
                                                 absl::StrJoin(SweepValueColumns(), ", ")));
}

absl::StatusOr<SweepPivot> PivotSweep(const v1::SweepSpec& sweep, const v1::SweepResult& result,
                                      absl::string_view row_field, absl::string_view column_field,
                                      absl::string_view value_column) {
  std::vector<std::string> fields;
  for (const v1::SweepAxis& a : sweep.axes()) fields.push_back(a.field());
  auto axis = [&](absl::string_view f) -> int {
    for (size_t i = 0; i < fields.size(); ++i) {
      if (fields[i] == f) return static_cast<int>(i);
    }
    return -1;
  };
  const int r = axis(row_field), c = axis(column_field);
  for (auto [f, i] : {std::pair{row_field, r}, std::pair{column_field, c}}) {
    if (i < 0) {
      return absl::InvalidArgumentError(absl::StrCat("pivot: '", f,
                                                     "' is not an axis of the sweep; its axes are ",
                                                     absl::StrJoin(fields, ", ")));
    }
  }
  if (r == c) {
    return absl::InvalidArgumentError(
        absl::StrCat("pivot: rows and columns are both ", row_field, "; give two different axes"));
  }
  if (auto v = SweepCellValue(v1::SweepCell(), value_column); !v.ok()) return v.status();

  SweepPivot pivot;
  pivot.row_field = std::string(row_field);
  pivot.column_field = std::string(column_field);
  pivot.value_column = std::string(value_column);
  std::map<std::string, size_t> rows, columns;
  auto index = [](std::map<std::string, size_t>& m, std::vector<std::string>& labels,
                  const std::string& label) {
    auto [it, added] = m.emplace(label, labels.size());
    if (added) labels.push_back(label);
    return it->second;
  };
  for (const v1::SweepCell& cell : result.cells()) {
    if (cell.values_size() != static_cast<int>(fields.size())) continue;
    std::string row = cell.values(r);
    std::vector<std::string> rest;
    for (int i = 0; i < cell.values_size(); ++i) {
      if (i != r && i != c) rest.push_back(absl::StrCat(fields[i], "=", cell.values(i)));
    }
    if (!rest.empty()) absl::StrAppend(&row, " (", absl::StrJoin(rest, ", "), ")");
    const size_t ri = index(rows, pivot.row_labels, row);
    const size_t ci = index(columns, pivot.column_labels, cell.values(c));
    if (pivot.entries.size() <= ri) pivot.entries.resize(ri + 1);
    for (auto& e : pivot.entries) e.resize(pivot.column_labels.size());
    SweepPivot::Entry& e = pivot.entries[ri][ci];
    e.present = true;
    e.outcome = cell.outcome();
    e.value = *SweepCellValue(cell, value_column);
  }
  for (auto& e : pivot.entries) e.resize(pivot.column_labels.size());
  return pivot;
}

}  // namespace benchd
