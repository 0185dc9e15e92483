#include "client/sweep_view.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
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

// A CSV field: the column's value in the CSV's unit (a count as an integer).
std::string CsvNumber(const SweepColumn& column, const v1::SweepCell& c) {
  const std::optional<double> v = column.Csv(c);
  if (v && column.integer) return fmt::format("{}", static_cast<int64_t>(std::llround(*v)));
  return Number(v);
}

// A value as the table and the progress line show it.
std::string TableText(SweepFormat format, double v) {
  switch (format) {
    case SweepFormat::kMs:
      return FormatMs(v / 1e3);
    case SweepFormat::kRate:
      return FormatRate(v);
    case SweepFormat::kRatio:
      return fmt::format("{:.2f}x", v);
    case SweepFormat::kShare:
      return FormatPercent(v);
    case SweepFormat::kSeconds:
      return FormatSeconds(v);
    case SweepFormat::kMib:
      return fmt::format("{:.1f}", v);
    case SweepFormat::kNumber:
      break;
  }
  return fmt::format("{:.6g}", v);
}

std::string Shown(const SweepColumn& column, const v1::SweepCell& c) {
  const std::optional<double> v = column.Value(c);
  return v ? TableText(column.format, *v) : "";
}

// A value as the pivot shows it: 2 decimals (3 significant digits below 1 ms).
std::string PivotText(SweepFormat format, double v) {
  switch (format) {
    case SweepFormat::kMs:
      return std::fabs(v) < 1 ? FormatRate(v) : fmt::format("{:.2f}", v);
    case SweepFormat::kRatio:
      return fmt::format("{:.2f}x", v);
    case SweepFormat::kShare:
      return FormatPercent(v);
    case SweepFormat::kRate:
      return FormatRate(v);
    case SweepFormat::kNumber:
      return fmt::format("{:.6g}", v);
    default:
      return fmt::format("{:.2f}", v);
  }
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
  const SweepColumns& table = SweepColumnsOf(SweepKind(c));
  for (const std::string& name : table.line) {
    const SweepColumn* column = table.Find(name);
    if (column == nullptr) continue;
    const std::string shown = Shown(*column, c);
    if (!shown.empty()) line += ", " + absl::StrReplaceAll(column->line, {{"{}", shown}});
  }
  if (c.outcome() != v1::SWEEP_CELL_OUTCOME_OK) {
    line += ": " + c.error_message().substr(0, 200);
  }
  return line;
}

std::string SweepTable(const v1::SweepSpec& sweep, const v1::SweepResult& in) {
  return SweepTable(SweepKind(in), sweep, in);
}

std::string SweepTable(v1::JobSpec::KindCase kind, const v1::SweepSpec& sweep,
                       const v1::SweepResult& in) {
  v1::SweepResult result = in;
  DeriveSweepColumns(sweep, &result);
  const SweepColumns& table = SweepColumnsOf(kind);
  std::vector<Table::Column> columns;
  for (const v1::SweepAxis& a : sweep.axes()) columns.push_back({a.field()});
  columns.push_back({"outcome"});
  for (const SweepColumn& c : table.columns) {
    if (!c.header.empty()) columns.push_back({c.header, Table::Align::kRight});
  }
  columns.push_back({"error"});
  Table t(columns);
  for (const v1::SweepCell& c : result.cells()) {
    std::vector<std::string> row(c.values().begin(), c.values().end());
    row.resize(sweep.axes_size());
    row.push_back(SweepOutcomeName(c.outcome()));
    for (const SweepColumn& col : table.columns) {
      if (!col.header.empty()) row.push_back(Shown(col, c));
    }
    row.push_back(c.outcome() == v1::SWEEP_CELL_OUTCOME_OK ? "" : c.error_message().substr(0, 120));
    t.AddRow(std::move(row));
  }
  return "Sweep: " + SweepCountsText(result) + "\n" + t.Render("  ");
}

std::string SweepCsv(const v1::Job& job) {
  const v1::SweepSpec& sweep = job.spec().sweep();
  const SweepColumns& table = SweepColumnsOf(SweepKind(job.spec()));
  std::vector<std::string> header = {"job_id", "index"};
  for (const v1::SweepAxis& a : sweep.axes()) header.push_back(CsvField(a.field()));
  header.push_back("outcome");
  for (const SweepColumn& c : table.columns) header.push_back(CsvField(c.csv));
  header.push_back("error_code");
  header.push_back("error_message");
  std::string out = absl::StrJoin(header, ",") + "\n";
  const v1::SweepResult result = Derived(job);
  for (const v1::SweepCell& c : result.cells()) {
    std::vector<std::string> row = {job.id(), fmt::format("{}", c.index())};
    for (int i = 0; i < sweep.axes_size(); ++i) {
      row.push_back(CsvField(i < c.values_size() ? c.values(i) : ""));
    }
    row.push_back(SweepOutcomeName(c.outcome()));
    for (const SweepColumn& col : table.columns) row.push_back(CsvNumber(col, c));
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
  const v1::JobSpec::KindCase kind = SweepKind(job.spec());
  const SweepColumns& table = SweepColumnsOf(kind);
  const std::string value = flags.value.empty() ? table.Default().name : flags.value;
  auto p = PivotSweep(kind, job.spec().sweep(), result, axes[0], axes[1], value);
  if (!p.ok()) return p.status();
  const SweepColumn& column = *table.Find(value);
  std::vector<std::vector<std::string>> rows;
  for (size_t r = 0; r < p->row_labels.size(); ++r) {
    std::vector<std::string> row = {p->row_labels[r]};
    for (const SweepPivot::Entry& e : p->entries[r]) {
      if (!e.present) {
        row.push_back("");
      } else if (e.value) {
        row.push_back(csv ? Number(e.value) : PivotText(column.format, *e.value));
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
  return fmt::format("{} by {} and {}\n", value, p->row_field, p->column_field) + t.Render();
}

}  // namespace benchd::client
