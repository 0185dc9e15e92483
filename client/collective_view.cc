#include "client/collective_view.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/table.h"
#include "common/collective_math.h"
#include "common/collective_svg.h"
#include "fmt/format.h"

namespace benchd::client {
namespace {

std::vector<std::string> List(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipWhitespace());
}

}  // namespace

absl::StatusOr<v1::JobSpec> BuildCollectiveSpec(const CollectiveOptions& o) {
  v1::JobSpec spec;
  v1::CollectiveSpec* c = spec.mutable_collective();
  if (!o.group.empty() && !o.devices.empty()) {
    return absl::InvalidArgumentError(
        "--group and --device: give one (a resident group, or devices and a backend)");
  }
  c->set_group(o.group);
  for (const auto& d : List(o.devices)) c->add_devices(d);
  if (!o.backend.empty()) {
    auto b = ParseBackend(o.backend);
    if (!b.ok()) return absl::InvalidArgumentError(absl::StrCat("--", b.status().message()));
    c->set_backend(*b);
  }
  for (const auto& name : List(o.backends)) {
    auto b = ParseBackend(name);
    if (!b.ok())
      return absl::InvalidArgumentError(absl::StrCat("--backends: ", b.status().message()));
    c->add_backends(*b);
  }
  for (const auto& w : List(o.world_sizes)) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n)) {
      return absl::InvalidArgumentError(
          fmt::format("--world-sizes: '{}' is not a number of ranks", w));
    }
    c->add_world_sizes(n);
  }
  auto op = ParseCollectiveOp(o.op);
  if (!op.ok()) return absl::InvalidArgumentError(absl::StrCat("--op: ", op.status().message()));
  c->set_op(*op);
  auto dtype = ParseDtype(o.dtype);
  if (!dtype.ok())
    return absl::InvalidArgumentError(absl::StrCat("--dtype: ", dtype.status().message()));
  c->set_dtype(*dtype);
  if (!o.sizes.empty()) {
    for (const auto& s : List(o.sizes)) {
      auto bytes = ParseByteSize(s, "--sizes");
      if (!bytes.ok()) return bytes.status();
      c->add_sizes_bytes(*bytes);
    }
  }
  if (!o.min.empty()) {
    auto bytes = ParseByteSize(o.min, "--min");
    if (!bytes.ok()) return bytes.status();
    c->set_min_bytes(*bytes);
  }
  if (!o.max.empty()) {
    auto bytes = ParseByteSize(o.max, "--max");
    if (!bytes.ok()) return bytes.status();
    c->set_max_bytes(*bytes);
  }
  if (o.factor) c->set_factor(*o.factor);
  if (o.warmup) c->set_warmup_iters(*o.warmup);
  if (o.iters) c->set_iters(*o.iters);
  if (o.timeout_seconds) c->set_timeout_seconds(*o.timeout_seconds);
  c->set_in_place(o.in_place);
  return spec;
}

std::string CollectiveTable(const v1::CollectiveResult& r) {
  using A = Table::Align;
  Table t({{"size", A::kRight},
           {"world", A::kRight},
           {"backend"},
           {"median µs", A::kRight},
           {"p99 µs", A::kRight},
           {"algbw GB/s", A::kRight},
           {"busbw GB/s", A::kRight},
           {"wrong", A::kRight}});
  for (const auto& row : r.rows()) {
    t.AddRow({FormatBytes(row.size_bytes()), fmt::format("{}", row.world_size()),
              BackendName(row.backend()), fmt::format("{:.1f}", row.duration().median() * 1e6),
              fmt::format("{:.1f}", row.duration().p99() * 1e6),
              fmt::format("{:.3f}", row.algbw_gbps()), fmt::format("{:.3f}", row.busbw_gbps()),
              fmt::format("{}", row.wrong_elements())});
  }
  return t.Render();
}

std::string CollectiveResultView(const v1::CollectiveResult& r) {
  std::string out = fmt::format(
      "{} {}, {}, {} warm-up + {} measured iterations (slowest rank per iteration)\n",
      CollectiveOpName(r.spec().op()), DtypeName(r.spec().dtype()),
      r.spec().in_place() ? "in place" : "out of place", r.spec().warmup_iters(), r.spec().iters());
  out += CollectiveTable(r);
  for (const auto& g : r.groups()) out += "group " + GroupUseText(g) + "\n";
  out += fmt::format("wrong elements: {}{}\n", r.wrong_elements(),
                     r.wrong_elements() == 0 ? " (all results exact)" : " (CHECK FAILED)");
  for (const auto& p : r.plots()) {
    if (!p.artifact().empty()) out += fmt::format("plot {}: {}\n", p.name(), p.artifact());
  }
  return out;
}

std::string CollectiveRowLine(const v1::CollectiveRow& row) {
  return fmt::format("{} x{} {}: median {:.1f} µs, busbw {:.3f} GB/s, wrong {}",
                     BackendName(row.backend()), row.world_size(), FormatBytes(row.size_bytes()),
                     row.duration().median() * 1e6, row.busbw_gbps(), row.wrong_elements());
}

std::string GroupUseText(const v1::CollectiveGroupUse& g) {
  return fmt::format(
      "{} ({} on {}): {}", g.group(), BackendName(g.backend()), absl::StrJoin(g.devices(), ","),
      g.was_resident() ? "resident, no set-up in this job"
                       : fmt::format("set up for this job in {:.3f} s{}", g.setup_seconds(),
                                     g.transient() ? " (transient, destroyed after)" : ""));
}

std::string GroupStateName(v1::GroupState s) {
  switch (s) {
    case v1::GROUP_STATE_READY:
      return "ready";
    case v1::GROUP_STATE_BROKEN:
      return "broken";
    default:
      return "unknown";
  }
}

std::string GroupsTable(const std::vector<v1::Group>& groups) {
  if (groups.empty()) return "no process groups\n";
  using A = Table::Align;
  Table t({{"id"},
           {"backend"},
           {"devices"},
           {"state"},
           {"setup s", A::kRight},
           {"jobs", A::kRight},
           {"reason"}});
  for (const auto& g : groups) {
    t.AddRow({g.id(), BackendName(g.backend()), absl::StrJoin(g.devices(), ","),
              GroupStateName(g.state()), fmt::format("{:.3f}", g.setup_seconds()),
              fmt::format("{}", g.jobs_run()), g.broken_reason()});
  }
  std::string out = t.Render();
  // A broken group never re-forms, even once its members are back
  // (docs/architecture.md "Cluster"): say how to make it again.
  for (const auto& g : groups) {
    if (g.state() != v1::GROUP_STATE_BROKEN) continue;
    out += fmt::format(
        "{} is broken and does not re-form by itself: re-create it (benchctl groups create "
        "--device {} --backend {}) and drop it (benchctl groups destroy {})\n",
        g.id(), absl::StrJoin(g.devices(), ","), BackendName(g.backend()), g.id());
  }
  return out;
}

std::string GroupView(const v1::Group& g) {
  std::string out = fmt::format("group {}: {} on {} ({} ranks), {}, set up in {:.3f} s\n", g.id(),
                                BackendName(g.backend()), absl::StrJoin(g.devices(), ","),
                                g.devices_size(), GroupStateName(g.state()), g.setup_seconds());
  if (!g.broken_reason().empty()) out += "broken: " + g.broken_reason() + "\n";
  return out;
}

std::vector<std::string> SavePlots(const v1::Job& job, const std::string& dir) {
  std::vector<std::string> lines;
  if (!job.result().has_collective()) return lines;
  for (const auto& p : job.result().collective().plots()) {
    const std::string path =
        fmt::format("{}/{}-{}.svg", dir.empty() ? "." : dir, job.id(), p.name());
    std::ofstream out(path);
    out << p.svg();
    lines.push_back(out ? fmt::format("saved {}", path) : fmt::format("cannot write {}", path));
  }
  return lines;
}

}  // namespace benchd::client
