#include "client/memory_view.h"

#include <fmt/format.h>

#include <vector>

#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/table.h"
#include "common/model_config.h"

namespace benchd::client {
namespace {

using Align = Table::Align;

// "1.23 GiB" / "45.6 MiB".
std::string Bytes(int64_t b) { return FormatBytes(b); }

const v1::MemoryPhase* Phase(const v1::MemoryRun& run, const std::string& name) {
  for (const v1::MemoryPhase& p : run.phases()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

std::string PhasePeak(const v1::MemoryRun& run, const std::string& name) {
  const v1::MemoryPhase* p = Phase(run, name);
  return p == nullptr ? "-" : Bytes(p->peak_allocated_bytes());
}

}  // namespace

std::string MemoryStacksName(v1::MemoryStacks s) {
  switch (s) {
    case v1::MEMORY_STACKS_NONE:
      return "none";
    case v1::MEMORY_STACKS_PYTHON:
      return "python";
    case v1::MEMORY_STACKS_CPP:
    case v1::MEMORY_STACKS_UNSPECIFIED:
      return "cpp";
    case v1::MEMORY_STACKS_ALL:
      return "all";
    default:
      return fmt::format("unknown({})", static_cast<int>(s));
  }
}

std::string MemoryPeakTable(const v1::MemoryResult& r, const std::string& indent) {
  Table t({{"run"},
           {"context", Align::kRight},
           {"mode"},
           {"precision"},
           {"peak alloc", Align::kRight},
           {"peak reserved", Align::kRight},
           {"resident", Align::kRight},
           {"forward", Align::kRight},
           {"backward", Align::kRight},
           {"optimizer", Align::kRight},
           {"1 activation", Align::kRight},
           {"status"}});
  for (const v1::MemoryRun& run : r.runs()) {
    std::vector<std::string> row = {run.name(), std::to_string(run.step().context_length()),
                                    ModeName(run.step().mode()),
                                    PrecisionName(run.step().precision())};
    if (run.out_of_memory() && run.peak_allocated_bytes() == 0) {
      row.insert(row.end(), {Bytes(run.oom_allocated_bytes()), Bytes(run.oom_reserved_bytes()), "-",
                             "-", "-", "-", Bytes(run.activation_bytes())});
    } else {
      row.insert(row.end(), {Bytes(run.peak_allocated_bytes()), Bytes(run.peak_reserved_bytes()),
                             Bytes(run.baseline_allocated_bytes()), PhasePeak(run, "forward"),
                             PhasePeak(run, "backward"), PhasePeak(run, "optimizer_step"),
                             Bytes(run.activation_bytes())});
    }
    if (run.out_of_memory()) {
      row.push_back(fmt::format("OOM (allocated {}, reserved {}, device free {} of {})",
                                Bytes(run.oom_allocated_bytes()), Bytes(run.oom_reserved_bytes()),
                                Bytes(run.oom_device_free_bytes()),
                                Bytes(run.oom_device_total_bytes())));
    } else {
      row.push_back(run.trace_wrapped() ? "ok (history wrapped: raise --max-entries)" : "ok");
    }
    t.AddRow(std::move(row));
  }
  return t.Render(indent);
}

std::string MemoryResultView(const v1::MemoryResult& r) {
  std::string device = r.device().empty() ? "-" : r.device();
  if (!r.device_name().empty()) device += " (" + r.device_name() + ")";
  std::string out = KeyValues(
      {
          {"Model",
           fmt::format("{} ({} parameters)",
                       r.spec().step().model().preset().empty() ? "custom"
                                                                : r.spec().step().model().preset(),
                       FormatThousands(r.parameter_count()))},
          {"Device", device},
          {"Stacks", MemoryStacksName(r.spec().stacks())},
          {"History", fmt::format("up to {} allocator events per run",
                                  FormatThousands(r.spec().max_entries()))},
      },
      11);
  out +=
      "\nPeak memory per run (allocated = held by tensors; reserved = cached by the allocator;\n"
      "resident = held before the recorded steps: weights, AdamW state)\n";
  out += MemoryPeakTable(r, "  ");
  for (const v1::MemoryRun& run : r.runs()) {
    out +=
        fmt::format("\n{}: {} x {} tokens, {} warm-up + {} recorded step{}\n", run.name(),
                    run.step().batch_size(), run.step().context_length(), run.step().warmup_steps(),
                    run.step().measure_steps(), run.step().measure_steps() == 1 ? "" : "s");
    if (run.out_of_memory()) out += "  out of memory: " + run.out_of_memory_message() + "\n";
    if (run.phases_size() > 0) {
      Table phases({{"phase"},
                    {"start alloc", Align::kRight},
                    {"start reserved", Align::kRight},
                    {"peak alloc", Align::kRight},
                    {"peak reserved", Align::kRight}});
      for (const v1::MemoryPhase& p : run.phases()) {
        phases.AddRow({p.name(), Bytes(p.start_allocated_bytes()), Bytes(p.start_reserved_bytes()),
                       Bytes(p.peak_allocated_bytes()), Bytes(p.peak_reserved_bytes())});
      }
      out += phases.Render("  ");
    }
    if (run.allocator_peak_allocated_bytes() > 0) {
      const bool agree = run.allocator_peak_allocated_bytes() == run.peak_allocated_bytes() &&
                         run.allocator_peak_reserved_bytes() == run.peak_reserved_bytes();
      out += fmt::format(
          "  allocator's own peaks: requested {}, reserved {}{}; "
          "max_memory_allocated (512 B blocks) {}\n",
          Bytes(run.allocator_peak_allocated_bytes()), Bytes(run.allocator_peak_reserved_bytes()),
          agree ? " (agree with the trace)" : " (differ from the trace's)",
          Bytes(run.max_memory_allocated_bytes()));
    }
    if (run.largest_allocations_size() > 0) {
      out += fmt::format("  largest allocations\n");
      Table big({{"size", Align::kRight}, {"phase"}, {"count", Align::kRight}, {"where"}});
      for (const v1::MemoryAllocation& a : run.largest_allocations()) {
        std::string where = a.origin();
        if (where.empty() && a.frames_size() > 0) where = a.frames(0);
        if (where.empty()) where = "-";
        big.AddRow({Bytes(a.size_bytes()), a.phase().empty() ? "(between phases)" : a.phase(),
                    std::to_string(a.count()), where});
      }
      out += big.Render("    ");
    }
    std::vector<std::string> files;
    if (!run.snapshot_artifact().empty()) files.push_back(run.snapshot_artifact());
    if (!run.timeline_artifact().empty()) files.push_back(run.timeline_artifact());
    if (!files.empty()) out += "  artifacts: " + absl::StrJoin(files, ", ") + "\n";
  }
  if (!r.artifacts_dir().empty()) {
    out += fmt::format(
        "\nArtifacts in {} on the daemon's host (memory_viz reads the .pickle files:\n"
        "  python -m torch.cuda._memory_viz trace_plot FILE -o FILE.html, or "
        "pytorch.org/memory_viz)\n",
        r.artifacts_dir());
  }
  return out;
}

std::string MemorySpecSummary(const v1::MemorySpec& m) {
  const v1::BenchmarkSpec& s = m.step();
  std::vector<std::string> modes, precisions, contexts;
  for (int x : m.modes()) modes.push_back(ModeName(static_cast<v1::BenchmarkMode>(x)));
  for (int x : m.precisions()) precisions.push_back(PrecisionName(static_cast<v1::Precision>(x)));
  for (int64_t c : m.context_lengths()) contexts.push_back(std::to_string(c));
  if (modes.empty()) modes.push_back(ModeName(s.mode()));
  if (precisions.empty()) precisions.push_back(PrecisionName(s.precision()));
  if (contexts.empty()) contexts.push_back(std::to_string(s.context_length()));
  const size_t runs = modes.size() * precisions.size() * contexts.size();
  std::string model = s.model().preset();
  if (model.empty()) model = fmt::format("d{}/L{}", s.model().d_model(), s.model().num_layers());
  return fmt::format("{} {} {} batch {} ctx {}, {} recorded step{} ({} run{}, stacks {})", model,
                     absl::StrJoin(modes, "/"), absl::StrJoin(precisions, "/"), s.batch_size(),
                     absl::StrJoin(contexts, ","), m.record_steps(),
                     m.record_steps() == 1 ? "" : "s", runs, runs == 1 ? "" : "s",
                     MemoryStacksName(m.stacks()));
}

std::string TimelineFileName(const std::string& job_id, const v1::MemoryResult& r, int run) {
  if (r.runs_size() == 1) return fmt::format("{}-timeline.svg", job_id);
  return fmt::format("{}-timeline-{}.svg", job_id, r.runs(run).name());
}

}  // namespace benchd::client
