#include "client/estimate_view.h"

#include "absl/strings/str_cat.h"
#include "client/table.h"
#include "common/memory_svg.h"
#include "common/model_config.h"

namespace benchd::client {
namespace {

using memory::HumanBytes;

// Exact bytes beside the rounded figure, so a user can check the arithmetic.
std::string Bytes(int64_t bytes) { return absl::StrCat(HumanBytes(bytes), " (", bytes, " B)"); }

std::string Terms(const std::string& title,
                  const google::protobuf::RepeatedPtrField<v1::EstimateTerm>& terms, bool sharded) {
  std::vector<Table::Column> columns = {{"term"}, {"bytes", Table::Align::kRight}};
  if (sharded) columns.push_back({"per device", Table::Align::kRight});
  columns.push_back({"formula"});
  Table table(columns);
  for (const v1::EstimateTerm& t : terms) {
    std::vector<std::string> row = {t.name(), Bytes(t.bytes())};
    if (sharded) row.push_back(Bytes(t.per_device_bytes()));
    row.push_back(t.formula());
    table.AddRow(std::move(row));
  }
  return absl::StrCat(title, "\n", table.Render("  "), "\n");
}

}  // namespace

std::string EstimateView(const v1::MemoryEstimate& e) {
  const v1::EstimateRequest& r = e.request();
  const v1::ModelConfig& m = r.model();
  const v1::Sharding& s = r.sharding();
  const bool sharded = e.devices() > 1;
  std::string out = absl::StrCat(
      "Memory estimate: ", m.preset().empty() ? "custom model" : m.preset(), " (V ", m.vocab_size(),
      ", d_model ", m.d_model(), ", d_ff ", m.d_ff(), ", ", m.num_layers(), " layers, ",
      m.num_heads(), " heads; ", e.parameter_count(), " parameters), ", ModeName(r.mode()), " ",
      PrecisionName(r.precision()), ", batch ", r.batch_size(), " x context ", r.context_length(),
      r.autograd() ? ", through autograd" : "", "\n");
  if (sharded) {
    absl::StrAppend(&out, "Sharding: data_parallel ", s.data_parallel(),
                    s.fsdp() ? " (FSDP)" : absl::StrCat(" (ZeRO stage ", s.zero_stage(), ")"),
                    ", tensor_parallel ", s.tensor_parallel(), ", pipeline_stages ",
                    s.pipeline_stages(), ": ", e.devices(), " devices\n");
  }
  absl::StrAppend(&out, "Peak: ", Bytes(e.total_bytes()), " at the ", e.peak_phase(),
                  sharded ? absl::StrCat("; per device ", Bytes(e.per_device_bytes())) : "",
                  "\n\n");
  absl::StrAppend(&out, Terms("Model state", e.model_state(), sharded));
  absl::StrAppend(
      &out, Terms("Saved for backward, per layer (one layer)", e.activations_per_layer(), sharded));
  absl::StrAppend(&out, Terms("Activations and transients", e.activations(), sharded));
  google::protobuf::RepeatedPtrField<v1::EstimateTerm> residual;
  *residual.Add() = e.residual_stream();
  absl::StrAppend(&out, Terms("Residual stream (CS336 memory_profiling (d))", residual, sharded));

  std::vector<Table::Column> columns = {{"phase"}, {"peak", Table::Align::kRight}};
  if (sharded) columns.push_back({"per device", Table::Align::kRight});
  columns.push_back({"terms alive"});
  Table phases(columns);
  for (const v1::EstimatePhase& p : e.phases()) {
    std::vector<std::string> row = {p.name(), Bytes(p.peak_bytes())};
    if (sharded) row.push_back(Bytes(p.per_device_peak_bytes()));
    row.push_back(p.formula());
    phases.AddRow(std::move(row));
  }
  absl::StrAppend(&out, "Phases\n", phases.Render("  "), "\n");
  absl::StrAppend(&out, "Not modelled\n");
  for (const std::string& n : e.not_modelled()) absl::StrAppend(&out, "  - ", n, "\n");
  return out;
}

}  // namespace benchd::client
