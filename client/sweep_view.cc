#include "client/sweep_view.h"

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/csv.h"
#include "client/format.h"
#include "client/table.h"
#include "common/sweep_spec.h"
#include "common/sweep_table.h"

namespace benchd::client {
namespace {

// The shortest text that reads back as the same double ("" when unset).
std::string Number(std::optional<double> v) { return v ? fmt::format("{}", *v) : std::string(); }

std::string Shown(const v1::SweepCell& c, absl::string_view column) {
  const std::optional<double> v = *SweepCellValue(c, column);
  if (!v) return "";
  if (column == "median_step_ms") return FormatMs(*v / 1e3);
  if (column == "tokens_per_second") return FormatRate(*v);
  if (column == "speedup_vs_fp32") return fmt::format("{:.2f}x", *v);
  if (absl::EndsWith(column, "_share")) return FormatPercent(*v);
  if (column == "wall_seconds") return FormatSeconds(*v);
  return fmt::format("{:.1f}", *v);
}

std::string OutcomeText(v1::SweepCellOutcome o) {
  switch (o) {
    case v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY:
      return "OOM";
    case v1::SWEEP_CELL_OUTCOME_TIMEOUT:
      return "TIMEOUT";
    case v1::SWEEP_CELL_OUTCOME_FAILED:
      return "FAILED";
    default:
      return "ok";
  }
}

// The stored job's sweep with its columns derived (a summary's cells are gone).
v1::SweepResult Derived(const v1::Job& job) {
  v1::SweepResult r = job.result().sweep();
  DeriveSweepColumns(job.spec().sweep(), &r);
  return r;
}

}  // namespace

absl::Status ApplySweepFlags(const std::vector<std::string>& sweeps,
                             std::optional<double> cell_timeout, v1::JobSpec* spec) {
  if (sweeps.empty()) {
    if (cell_timeout) {
      return absl::InvalidArgumentError("--cell-timeout needs --sweep: it limits each cell");
    }
    return absl::OkStatus();
  }
  v1::SweepSpec* sweep = spec->mutable_sweep();
  for (const std::string& flag : sweeps) {
    const std::vector<std::string> kv = absl::StrSplit(flag, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
      return absl::InvalidArgumentError(fmt::format(
          "--sweep: expected FIELD=V1,V2,... (e.g. precision=fp32,bf16), got '{}'", flag));
    }
    v1::SweepAxis* axis = sweep->add_axes();
    axis->set_field(kv[0]);
    for (absl::string_view v : absl::StrSplit(kv[1], ',')) {
      auto canonical = CanonicalSweepValue(spec->kind_case(), kv[0], v, "--sweep " + kv[0]);
      if (!canonical.ok()) return canonical.status();
      axis->add_values(*canonical);
    }
  }
  if (cell_timeout) sweep->set_cell_timeout_seconds(*cell_timeout);
  return absl::OkStatus();
}

std::string SweepSummary(const v1::SweepSpec& sweep) {
  std::vector<std::string> axes;
  int64_t cells = 1;
  for (const v1::SweepAxis& a : sweep.axes()) {
    axes.push_back(fmt::format("{}={}", a.field(), absl::StrJoin(a.values(), ",")));
    cells *= a.values_size();
  }
  return fmt::format(
      "{} ({} cell{}{})", absl::StrJoin(axes, " x "), cells, cells == 1 ? "" : "s",
      sweep.has_cell_timeout_seconds()
          ? fmt::format(", each at most {}", FormatSeconds(sweep.cell_timeout_seconds()))
          : "");
}

std::string SweepCountsText(const v1::SweepResult& r) {
  return fmt::format("{} of {} cells ran: {} ok, {} out of memory, {} timed out, {} failed",
                     r.cells_size(), r.cells_total(), r.cells_ok(), r.cells_out_of_memory(),
                     r.cells_timeout(), r.cells_failed());
}

std::string SweepCellLine(const v1::SweepCell& c, int cells_total) {
  std::string line = fmt::format("cell {}/{}", c.index() + 1, cells_total);
  for (const std::string& v : c.values()) line += " " + v;
  line += ": " + SweepOutcomeName(c.outcome());
  if (c.has_median_step_seconds())
    line += ", median step " + FormatMs(c.median_step_seconds()) + " ms";
  if (c.has_speedup_vs_fp32()) line += fmt::format(", {:.2f}x fp32", c.speedup_vs_fp32());
  if (c.has_tokens_per_second()) line += ", " + FormatRate(c.tokens_per_second()) + " tokens/s";
  if (c.outcome() != v1::SWEEP_CELL_OUTCOME_OK) {
    line += ": " + c.error_message().substr(0, 200);
  }
  return line;
}

std::string SweepTable(const v1::SweepSpec& sweep, const v1::SweepResult& in) {
  v1::SweepResult result = in;
  DeriveSweepColumns(sweep, &result);
  std::vector<Table::Column> columns;
  for (const v1::SweepAxis& a : sweep.axes()) columns.push_back({a.field()});
  for (const char* h : {"outcome"}) columns.push_back({h});
  for (const char* h : {"step ms", "tokens/s", "vs fp32", "fwd", "bwd", "opt", "wall"}) {
    columns.push_back({h, Table::Align::kRight});
  }
  columns.push_back({"error"});
  Table t(columns);
  for (const v1::SweepCell& c : result.cells()) {
    std::vector<std::string> row(c.values().begin(), c.values().end());
    row.resize(sweep.axes_size());
    row.push_back(SweepOutcomeName(c.outcome()));
    for (const char* col : {"median_step_ms", "tokens_per_second", "speedup_vs_fp32",
                            "forward_share", "backward_share", "optimizer_share", "wall_seconds"}) {
      row.push_back(Shown(c, col));
    }
    row.push_back(c.outcome() == v1::SWEEP_CELL_OUTCOME_OK ? "" : c.error_message().substr(0, 120));
    t.AddRow(std::move(row));
  }
  return "Sweep: " + SweepCountsText(result) + "\n" + t.Render("  ");
}

std::string SweepCsv(const v1::Job& job) {
  const v1::SweepSpec& sweep = job.spec().sweep();
  std::vector<std::string> header = {"job_id", "index"};
  for (const v1::SweepAxis& a : sweep.axes()) header.push_back(CsvField(a.field()));
  for (const char* h : {"outcome", "median_step_s", "tokens_per_second", "speedup_vs_fp32",
                        "forward_share", "backward_share", "optimizer_share", "peak_memory_bytes",
                        "wall_seconds", "error_code", "error_message"}) {
    header.push_back(h);
  }
  std::string out = absl::StrJoin(header, ",") + "\n";
  const v1::SweepResult result = Derived(job);
  for (const v1::SweepCell& c : result.cells()) {
    std::vector<std::string> row = {job.id(), fmt::format("{}", c.index())};
    for (int i = 0; i < sweep.axes_size(); ++i) {
      row.push_back(CsvField(i < c.values_size() ? c.values(i) : ""));
    }
    row.push_back(SweepOutcomeName(c.outcome()));
    auto opt = [](bool has, double v) { return has ? std::optional<double>(v) : std::nullopt; };
    row.push_back(Number(opt(c.has_median_step_seconds(), c.median_step_seconds())));
    row.push_back(Number(opt(c.has_tokens_per_second(), c.tokens_per_second())));
    row.push_back(Number(opt(c.has_speedup_vs_fp32(), c.speedup_vs_fp32())));
    row.push_back(Number(opt(c.has_forward_share(), c.forward_share())));
    row.push_back(Number(opt(c.has_backward_share(), c.backward_share())));
    row.push_back(Number(opt(c.has_optimizer_share(), c.optimizer_share())));
    const v1::BenchmarkResult* b = CellBenchmark(c);
    row.push_back(b && b->peak_memory_bytes() > 0 ? fmt::format("{}", b->peak_memory_bytes()) : "");
    row.push_back(Number(c.wall_seconds()));
    row.push_back(fmt::format("{}", c.error_code()));
    row.push_back(CsvField(c.error_message()));
    out += absl::StrJoin(row, ",") + "\n";
  }
  return out;
}

absl::StatusOr<std::string> SweepPivotText(const v1::Job& job, const PivotFlags& flags, bool csv) {
  const std::vector<std::string> axes = absl::StrSplit(flags.pivot, ',');
  if (axes.size() != 2) {
    return absl::InvalidArgumentError(fmt::format(
        "--pivot: expected ROWS,COLS (two axes of the sweep, e.g. model.preset,precision), got "
        "'{}'",
        flags.pivot));
  }
  if (!job.result().has_sweep()) {
    return absl::FailedPreconditionError(
        fmt::format("--pivot: job {} has no sweep result (it is {})", job.id(),
                    v1::JobState_Name(job.state())));
  }
  const v1::SweepResult result = Derived(job);
  auto p = PivotSweep(job.spec().sweep(), result, axes[0], axes[1], flags.value);
  if (!p.ok()) return p.status();
  std::vector<std::vector<std::string>> rows;
  for (size_t r = 0; r < p->row_labels.size(); ++r) {
    std::vector<std::string> row = {p->row_labels[r]};
    for (const SweepPivot::Entry& e : p->entries[r]) {
      if (!e.present) {
        row.push_back("");
      } else if (e.value) {
        if (csv) {
          row.push_back(Number(e.value));
        } else {
          row.push_back(flags.value == "median_step_ms"         ? fmt::format("{:.2f}", *e.value)
                        : flags.value == "speedup_vs_fp32"      ? fmt::format("{:.2f}x", *e.value)
                        : absl::EndsWith(flags.value, "_share") ? FormatPercent(*e.value)
                        : flags.value == "tokens_per_second"    ? FormatRate(*e.value)
                                                                : fmt::format("{:.2f}", *e.value));
        }
      } else {
        row.push_back(e.outcome == v1::SWEEP_CELL_OUTCOME_OK ? "-" : OutcomeText(e.outcome));
      }
    }
    rows.push_back(std::move(row));
  }
  const std::string corner = fmt::format("{}\\{}", p->row_field, p->column_field);
  if (csv) {
    std::vector<std::string> header = {CsvField(corner)};
    for (const std::string& c : p->column_labels) header.push_back(CsvField(c));
    std::string out = absl::StrJoin(header, ",") + "\n";
    for (auto& row : rows) {
      for (auto& f : row) f = CsvField(f);
      out += absl::StrJoin(row, ",") + "\n";
    }
    return out;
  }
  std::vector<Table::Column> columns = {{corner}};
  for (const std::string& c : p->column_labels) columns.push_back({c, Table::Align::kRight});
  Table t(columns);
  for (auto& row : rows) t.AddRow(std::move(row));
  return fmt::format("{} by {} and {}\n", flags.value, p->row_field, p->column_field) + t.Render();
}

}  // namespace benchd::client
