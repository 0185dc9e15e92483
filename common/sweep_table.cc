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

const SweepColumn* SweepColumns::Find(absl::string_view name) const {
  for (const SweepColumn& c : columns) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const SweepColumn& SweepColumns::Default() const {
  const SweepColumn* step = Find("median_step_ms");
  return step ? *step : columns.front();
}

std::vector<std::string> SweepColumns::Names() const {
  std::vector<std::string> names;
  for (const SweepColumn& c : columns) names.push_back(c.name);
  return names;
}

v1::JobSpec::KindCase SweepKind(const v1::JobSpec& spec) {
  return spec.kind_case() == v1::JobSpec::KIND_NOT_SET ? v1::JobSpec::kBenchmark : spec.kind_case();
}

namespace {

// A cell's kind: its request's, else its result's; unset when neither says.
v1::JobSpec::KindCase CellKind(const v1::SweepCell& c) {
  if (c.spec().kind_case() != v1::JobSpec::KIND_NOT_SET) return c.spec().kind_case();
  switch (c.result().kind_case()) {
    case v1::JobResult::kBenchmark:
      return v1::JobSpec::kBenchmark;
    case v1::JobResult::kProfile:
      return v1::JobSpec::kProfile;
    case v1::JobResult::kMemory:
      return v1::JobSpec::kMemory;
    case v1::JobResult::kCollective:
      return v1::JobSpec::kCollective;
    case v1::JobResult::kAttention:
      return v1::JobSpec::kAttention;
    case v1::JobResult::kPrecision:
      return v1::JobSpec::kPrecision;
    case v1::JobResult::kDdp:
      return v1::JobSpec::kDdp;
    default:
      return v1::JobSpec::KIND_NOT_SET;
  }
}

}  // namespace

v1::JobSpec::KindCase SweepKind(const v1::SweepResult& result) {
  for (const v1::SweepCell& c : result.cells()) {
    if (const v1::JobSpec::KindCase k = CellKind(c); k != v1::JobSpec::KIND_NOT_SET) return k;
  }
  return v1::JobSpec::kBenchmark;
}

v1::JobSpec::KindCase SweepKind(const v1::SweepCell& cell) {
  const v1::JobSpec::KindCase k = CellKind(cell);
  return k == v1::JobSpec::KIND_NOT_SET ? v1::JobSpec::kBenchmark : k;
}

std::string SweepKindName(v1::JobSpec::KindCase kind) {
  const google::protobuf::FieldDescriptor* f =
      v1::JobSpec::descriptor()->FindFieldByNumber(static_cast<int>(kind));
  return f ? std::string(f->name()) : std::string("benchmark");
}

namespace {

using Opt = std::optional<double>;
constexpr double kPerMib = 1.0 / (1 << 20);

Opt If(bool has, double v) { return has ? Opt(v) : Opt(); }
Opt Positive(double v) { return v > 0 ? Opt(v) : Opt(); }

SweepColumn Wall() {
  return {"wall_seconds",
          "wall",
          "wall_seconds",
          1,
          SweepFormat::kSeconds,
          "",
          [](const v1::SweepCell& c) { return Opt(c.wall_seconds()); }};
}

// The benchmark's (and a profile's unprofiled run's): the derived columns.
std::vector<SweepColumn> StepColumns() {
  using F = SweepFormat;
  return {
      {"median_step_ms", "step ms", "median_step_s", 1e3, F::kMs, "median step {} ms",
       [](const v1::SweepCell& c) {
         return If(c.has_median_step_seconds(), c.median_step_seconds());
       }},
      {"tokens_per_second", "tokens/s", "tokens_per_second", 1, F::kRate, "{} tokens/s",
       [](const v1::SweepCell& c) { return If(c.has_tokens_per_second(), c.tokens_per_second()); }},
      {"speedup_vs_fp32", "vs fp32", "speedup_vs_fp32", 1, F::kRatio, "{} fp32",
       [](const v1::SweepCell& c) { return If(c.has_speedup_vs_fp32(), c.speedup_vs_fp32()); }},
      {"forward_share", "fwd", "forward_share", 1, F::kShare, "",
       [](const v1::SweepCell& c) { return If(c.has_forward_share(), c.forward_share()); }},
      {"backward_share", "bwd", "backward_share", 1, F::kShare, "",
       [](const v1::SweepCell& c) { return If(c.has_backward_share(), c.backward_share()); }},
      {"optimizer_share", "opt", "optimizer_share", 1, F::kShare, "",
       [](const v1::SweepCell& c) { return If(c.has_optimizer_share(), c.optimizer_share()); }},
      {"peak_memory_mib", "", "peak_memory_bytes", kPerMib, F::kMib, "",
       [](const v1::SweepCell& c) {
         const v1::BenchmarkResult* b = CellBenchmark(c);
         return b ? Positive(static_cast<double>(b->peak_memory_bytes())) : Opt();
       },
       /*integer=*/true},
  };
}

const v1::AttentionResult* Attention(const v1::SweepCell& c) {
  return c.outcome() == v1::SWEEP_CELL_OUTCOME_OK && c.result().has_attention()
             ? &c.result().attention()
             : nullptr;
}

// An attention figure: `f` of the cell's result, unset without one.
template <typename F>
std::function<Opt(const v1::SweepCell&)> OfAttention(F f) {
  return [f](const v1::SweepCell& c) -> Opt {
    const v1::AttentionResult* a = Attention(c);
    return a ? f(*a) : Opt();
  };
}

Opt Median(const v1::Stats& s) { return s.count() > 0 ? Opt(s.median()) : Opt(); }

// Measured by the CUDA caching allocator; a CPU has none (the bytes are 0).
Opt Measured(const v1::AttentionResult& a, int64_t bytes) {
  return a.memory_source() == "cuda_caching_allocator" ? Opt(static_cast<double>(bytes)) : Opt();
}

std::vector<SweepColumn> AttentionColumns() {
  using A = v1::AttentionResult;
  using F = SweepFormat;
  return {
      {"median_forward_ms", "fwd ms", "median_forward_s", 1e3, F::kMs, "fwd {} ms",
       OfAttention([](const A& a) { return Median(a.forward()); })},
      {"median_backward_ms", "bwd ms", "median_backward_s", 1e3, F::kMs, "bwd {} ms",
       OfAttention([](const A& a) { return Median(a.backward()); })},
      {"median_step_ms", "fwd+bwd ms", "median_step_s", 1e3, F::kMs, "fwd+bwd {} ms",
       OfAttention([](const A& a) { return Median(a.step()); })},
      {"flash_forward_tflops", "fwd TFLOP/s", "flash_forward_tflops_per_second", 1, F::kRate,
       "fwd {} TFLOP/s",
       OfAttention([](const A& a) { return Positive(a.flash_forward_tflops_per_second()); })},
      {"flash_backward_tflops", "bwd TFLOP/s", "flash_backward_tflops_per_second", 1, F::kRate,
       "bwd {} TFLOP/s",
       OfAttention([](const A& a) { return Positive(a.flash_backward_tflops_per_second()); })},
      {"flash_step_tflops", "fwd+bwd TFLOP/s", "flash_step_tflops_per_second", 1, F::kRate, "",
       OfAttention([](const A& a) { return Positive(a.flash_step_tflops_per_second()); })},
      {"saved_activation_mib", "saved MiB", "saved_activation_bytes", kPerMib, F::kMib,
       "saved {} MiB",
       OfAttention([](const A& a) { return Measured(a, a.saved_activation_bytes()); }), true},
      {"peak_pass_mib", "peak MiB", "peak_pass_bytes", kPerMib, F::kMib, "peak {} MiB",
       OfAttention([](const A& a) { return Measured(a, a.peak_pass_bytes()); }), true},
      {"saved_by_formula_mib", "", "saved_by_formula_bytes", kPerMib, F::kMib, "",
       OfAttention(
           [](const A& a) { return Positive(static_cast<double>(a.saved_by_formula_bytes())); }),
       true},
      {"score_matrix_mib", "", "score_matrix_bytes", kPerMib, F::kMib, "",
       OfAttention(
           [](const A& a) { return Positive(static_cast<double>(a.score_matrix_bytes())); }),
       true},
  };
}

// The largest `bytes` over the cell's memory runs that fit; unset when none did.
std::function<Opt(const v1::SweepCell&)> OfMemoryRuns(int64_t (v1::MemoryRun::*bytes)() const) {
  return [bytes](const v1::SweepCell& c) -> Opt {
    if (c.outcome() != v1::SWEEP_CELL_OUTCOME_OK || !c.result().has_memory()) return Opt();
    Opt most;
    for (const v1::MemoryRun& r : c.result().memory().runs()) {
      if (r.out_of_memory()) continue;
      const double v = static_cast<double>((r.*bytes)());
      if (!most || v > *most) most = v;
    }
    return most;
  };
}

std::vector<SweepColumn> MemoryColumns() {
  using F = SweepFormat;
  using R = v1::MemoryRun;
  return {
      {"peak_allocated_mib", "peak alloc MiB", "peak_allocated_bytes", kPerMib, F::kMib,
       "peak {} MiB allocated", OfMemoryRuns(&R::peak_allocated_bytes), true},
      {"peak_reserved_mib", "peak reserved MiB", "peak_reserved_bytes", kPerMib, F::kMib,
       "{} MiB reserved", OfMemoryRuns(&R::peak_reserved_bytes), true},
      {"baseline_allocated_mib", "baseline MiB", "baseline_allocated_bytes", kPerMib, F::kMib,
       "baseline {} MiB", OfMemoryRuns(&R::baseline_allocated_bytes), true},
      {"max_memory_allocated_mib", "", "max_memory_allocated_bytes", kPerMib, F::kMib, "",
       OfMemoryRuns(&R::max_memory_allocated_bytes), true},
  };
}

const v1::PrecisionResult* Precision(const v1::SweepCell& c) {
  return c.outcome() == v1::SWEEP_CELL_OUTCOME_OK && c.result().has_precision()
             ? &c.result().precision()
             : nullptr;
}

// A field of the accumulation loop `name` ("fp32", "fp16", "mixed", "mixed_cast").
std::function<Opt(const v1::SweepCell&)> OfLoop(std::string name,
                                                double (v1::PrecisionAccumulationRow::*f)() const) {
  return [name, f](const v1::SweepCell& c) -> Opt {
    const v1::PrecisionResult* p = Precision(c);
    if (p == nullptr) return Opt();
    for (const v1::PrecisionAccumulationRow& r : p->accumulation()) {
      if (r.name() == name) return (r.*f)();
    }
    return Opt();
  };
}

std::function<Opt(const v1::SweepCell&)> LossUnder(v1::Precision dtype) {
  return [dtype](const v1::SweepCell& c) -> Opt {
    const v1::PrecisionResult* p = Precision(c);
    if (p == nullptr) return Opt();
    for (const v1::PrecisionAutocastRun& r : p->autocast()) {
      if (r.autocast_dtype() == dtype) return r.loss();
    }
    return Opt();
  };
}

std::vector<SweepColumn> PrecisionColumns() {
  using R = v1::PrecisionAccumulationRow;
  std::vector<SweepColumn> out;
  const char* loops[] = {"fp32", "fp16", "mixed", "mixed_cast"};
  for (const char* l : loops) {
    out.push_back({absl::StrCat(l, "_result"), absl::StrCat(l, " sum"), absl::StrCat(l, "_result"),
                   1, SweepFormat::kNumber, absl::StrCat(l, " {}"), OfLoop(l, &R::result)});
  }
  for (const char* l : loops) {
    out.push_back({absl::StrCat(l, "_relative_error"), absl::StrCat(l, " rel err"),
                   absl::StrCat(l, "_relative_error"), 1, SweepFormat::kNumber, "",
                   OfLoop(l, &R::relative_error)});
  }
  out.push_back({"bf16_loss", "bf16 loss", "bf16_loss", 1, SweepFormat::kNumber, "bf16 loss {}",
                 LossUnder(v1::PRECISION_BF16)});
  out.push_back({"fp16_loss", "fp16 loss", "fp16_loss", 1, SweepFormat::kNumber, "fp16 loss {}",
                 LossUnder(v1::PRECISION_FP16)});
  return out;
}

SweepColumns Table(std::vector<SweepColumn> columns) {
  SweepColumns t;
  t.columns = std::move(columns);
  t.columns.push_back(Wall());
  for (const SweepColumn& c : t.columns) {
    if (!c.line.empty()) t.line.push_back(c.name);
  }
  return t;
}

std::map<v1::JobSpec::KindCase, SweepColumns>* BuildTables() {
  auto* tables = new std::map<v1::JobSpec::KindCase, SweepColumns>;
  SweepColumns benchmark = Table(StepColumns());
  // The line as it always was: median step, speed-up, tokens/s.
  benchmark.line = {"median_step_ms", "speedup_vs_fp32", "tokens_per_second"};
  std::vector<SweepColumn> profile = StepColumns();
  profile.push_back({"profiler_overhead", "prof/unprof", "profiler_overhead", 1,
                     SweepFormat::kRatio, "", [](const v1::SweepCell& c) -> Opt {
                       if (c.outcome() != v1::SWEEP_CELL_OUTCOME_OK || !c.result().has_profile()) {
                         return Opt();
                       }
                       return Positive(c.result().profile().profiler_overhead());
                     }});
  SweepColumns profile_table = Table(std::move(profile));
  profile_table.line = benchmark.line;
  (*tables)[v1::JobSpec::KIND_NOT_SET] = Table({});
  (*tables)[v1::JobSpec::kBenchmark] = std::move(benchmark);
  (*tables)[v1::JobSpec::kProfile] = std::move(profile_table);
  (*tables)[v1::JobSpec::kAttention] = Table(AttentionColumns());
  (*tables)[v1::JobSpec::kMemory] = Table(MemoryColumns());
  (*tables)[v1::JobSpec::kPrecision] = Table(PrecisionColumns());
  return tables;
}

}  // namespace

const SweepColumns& SweepColumnsOf(v1::JobSpec::KindCase kind) {
  static const auto* tables = BuildTables();
  if (kind == v1::JobSpec::KIND_NOT_SET) kind = v1::JobSpec::kBenchmark;
  auto it = tables->find(kind);
  // Collective and ddp requests do not sweep: wall_seconds only.
  return it != tables->end() ? it->second : tables->at(v1::JobSpec::KIND_NOT_SET);
}

const std::vector<std::string>& SweepValueColumns() {
  static const auto* columns =
      new std::vector<std::string>(SweepColumnsOf(v1::JobSpec::kBenchmark).Names());
  return *columns;
}

std::vector<std::string> SweepValueColumns(v1::JobSpec::KindCase kind) {
  return SweepColumnsOf(kind).Names();
}

absl::StatusOr<const SweepColumn*> FindSweepColumn(v1::JobSpec::KindCase kind,
                                                   absl::string_view column) {
  const SweepColumns& table = SweepColumnsOf(kind);
  if (const SweepColumn* c = table.Find(column)) return c;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown value column '", column, "'; expected one of ", absl::StrJoin(table.Names(), ", ")));
}

absl::StatusOr<std::optional<double>> SweepCellValue(v1::JobSpec::KindCase kind,
                                                     const v1::SweepCell& cell,
                                                     absl::string_view column) {
  auto c = FindSweepColumn(kind, column);
  if (!c.ok()) return c.status();
  return (*c)->Value(cell);
}

absl::StatusOr<std::optional<double>> SweepCellValue(const v1::SweepCell& cell,
                                                     absl::string_view column) {
  return SweepCellValue(SweepKind(cell), cell, column);
}

absl::StatusOr<SweepPivot> PivotSweep(const v1::SweepSpec& sweep, const v1::SweepResult& result,
                                      absl::string_view row_field, absl::string_view column_field,
                                      absl::string_view value_column) {
  return PivotSweep(SweepKind(result), sweep, result, row_field, column_field, value_column);
}

absl::StatusOr<SweepPivot> PivotSweep(v1::JobSpec::KindCase kind, const v1::SweepSpec& sweep,
                                      const v1::SweepResult& result, absl::string_view row_field,
                                      absl::string_view column_field,
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
  auto value = FindSweepColumn(kind, value_column);
  if (!value.ok()) return value.status();

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
    e.value = (*value)->Value(cell);
  }
  for (auto& e : pivot.entries) e.resize(pivot.column_labels.size());
  return pivot;
}

}  // namespace benchd
