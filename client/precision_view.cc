#include "client/precision_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/csv.h"
#include "client/format.h"
#include "client/table.h"
#include "common/job_spec.h"
#include "common/model_config.h"

namespace benchd::client {
namespace {

using Align = Table::Align;

// Enough digits to tell 10.0001335 from 10.0021362 (the write-up prints 4).
std::string Value(double v) { return fmt::format("{:.9g}", v); }

std::string Error(double v) { return fmt::format("{:.3g}", v); }

}  // namespace

absl::StatusOr<v1::JobSpec> BuildPrecisionSpec(const PrecisionOptions& o) {
  v1::JobSpec spec;
  spec.set_device(o.device);
  v1::PrecisionSpec* p = spec.mutable_precision();
  for (absl::string_view item : absl::StrSplit(o.experiments, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    auto e = ParsePrecisionExperiment(std::string(item));
    if (!e.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--experiments: unknown experiment '", item,
                                                     "'; expected accumulation, autocast or both "
                                                     "(accumulation,autocast)"));
    }
    p->add_experiments(*e);
  }
  for (absl::string_view item : absl::StrSplit(o.autocast_dtypes, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    auto d = ParsePrecision(std::string(item));
    if (!d.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--autocast-dtypes: unknown dtype '", item,
                                                     "'; expected bf16, fp16 or both (bf16,fp16)"));
    }
    p->add_autocast_dtypes(*d);
  }
  if (o.count) p->set_count(*o.count);
  if (o.addend) p->set_addend(*o.addend);
  if (o.seed) p->set_seed(*o.seed);
  return spec;
}

std::string PrecisionSpecSummary(const v1::PrecisionSpec& s) {
  std::vector<std::string> parts;
  std::vector<int> experiments(s.experiments().begin(), s.experiments().end());
  if (experiments.empty())
    experiments = {v1::PRECISION_EXPERIMENT_ACCUMULATION, v1::PRECISION_EXPERIMENT_AUTOCAST};
  for (int e : experiments) {
    if (e == v1::PRECISION_EXPERIMENT_ACCUMULATION) {
      parts.push_back(fmt::format("accumulation ({:g} x {})", s.has_addend() ? s.addend() : 0.01,
                                  s.has_count() ? s.count() : 1000));
    } else if (e == v1::PRECISION_EXPERIMENT_AUTOCAST) {
      std::vector<std::string> dtypes;
      for (int d : s.autocast_dtypes()) dtypes.push_back(PrecisionName(v1::Precision(d)));
      if (dtypes.empty()) dtypes = {"bf16", "fp16"};
      parts.push_back("autocast " + absl::StrJoin(dtypes, ", "));
    } else {
      parts.push_back(PrecisionExperimentName(v1::PrecisionExperiment(e)));
    }
  }
  return absl::StrJoin(parts, "; ");
}

std::string PrecisionResultView(const v1::PrecisionResult& r) {
  std::string out;
  std::vector<std::pair<std::string, std::string>> kv;
  if (r.accumulation_size() > 0) {
    out += fmt::format("Accumulation: {:g} added {} times (exact {})\n", r.spec().addend(),
                       r.spec().count(),
                       Value(static_cast<double>(r.spec().count()) * r.spec().addend()));
    Table t({{"loop"},
             {"accumulator"},
             {"addend"},
             {"addend as stored", Align::kRight},
             {"result", Align::kRight},
             {"exact", Align::kRight},
             {"abs error", Align::kRight},
             {"rel error", Align::kRight}});
    for (const v1::PrecisionAccumulationRow& row : r.accumulation()) {
      t.AddRow({row.name(), row.accumulator_dtype(),
                row.addend_dtype() + (row.addend_cast() ? " -> " + row.accumulator_dtype() : ""),
                Value(row.addend_value()), Value(row.result()), Value(row.exact()),
                Error(row.absolute_error()), Error(row.relative_error())});
    }
    out += t.Render();
  }
  if (r.autocast_size() > 0) {
    if (!out.empty()) out += "\n";
    // A row per tensor (in the runs' order), a column per autocast dtype.
    std::vector<std::pair<std::string, std::string>> rows;  // tensor, role
    std::map<std::string, std::vector<std::string>> dtypes;
    for (const v1::PrecisionAutocastRun& run : r.autocast()) {
      for (const v1::PrecisionTensorDtype& t : run.tensors()) {
        if (!dtypes.count(t.tensor())) {
          rows.emplace_back(t.tensor(), t.role());
          dtypes[t.tensor()] = std::vector<std::string>(r.autocast_size(), "-");
        }
      }
    }
    std::vector<Table::Column> columns = {{"tensor"}, {"role"}};
    std::vector<std::string> devices;
    for (int i = 0; i < r.autocast_size(); ++i) {
      const v1::PrecisionAutocastRun& run = r.autocast(i);
      columns.push_back({fmt::format("autocast {}", PrecisionName(run.autocast_dtype()))});
      for (const v1::PrecisionTensorDtype& t : run.tensors()) dtypes[t.tensor()][i] = t.dtype();
      if (std::find(devices.begin(), devices.end(), run.autocast_device_type()) == devices.end())
        devices.push_back(run.autocast_device_type());
    }
    out += fmt::format("Autocast ({} autocast): the ToyModel's dtypes\n",
                       absl::StrJoin(devices, ", "));
    Table t(columns);
    for (const auto& [tensor, role] : rows) {
      std::vector<std::string> cells = {tensor, role};
      for (const std::string& d : dtypes[tensor]) cells.push_back(d);
      t.AddRow(cells);
    }
    std::vector<std::string> losses;
    for (const v1::PrecisionAutocastRun& run : r.autocast())
      losses.push_back(fmt::format("{} {:.4f}", PrecisionName(run.autocast_dtype()), run.loss()));
    out += t.Render();
    kv.emplace_back("Loss", absl::StrJoin(losses, ", "));
  }
  kv.emplace_back("Device", fmt::format("{} ({})", r.device(), r.device_name()));
  return out + KeyValues(kv);
}

std::string PrecisionCsv(const v1::Job& job) {
  const v1::PrecisionResult& r = job.result().precision();
  const std::string id = CsvField(job.id());
  std::string out = std::string(kPrecisionAccumulationCsvHeader) + "\n";
  for (const v1::PrecisionAccumulationRow& row : r.accumulation()) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", id, CsvField(row.name()),
                       CsvField(row.accumulator_dtype()), CsvField(row.addend_dtype()),
                       row.addend_cast() ? "true" : "false", row.addend_value(), row.result(),
                       row.exact(), row.absolute_error(), row.relative_error());
  }
  out += "\n" + std::string(kPrecisionAutocastCsvHeader) + "\n";
  for (const v1::PrecisionAutocastRun& run : r.autocast()) {
    for (const v1::PrecisionTensorDtype& t : run.tensors()) {
      out += fmt::format("{},{},{},{},{},{}\n", id, PrecisionName(run.autocast_dtype()),
                         CsvField(run.autocast_device_type()), CsvField(t.tensor()),
                         CsvField(t.role()), CsvField(t.dtype()));
    }
  }
  return out;
}

}  // namespace benchd::client
