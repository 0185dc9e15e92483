#include "client/list_views.h"

#include <fmt/format.h>

#include "client/format.h"
#include "client/job_view.h"
#include "client/table.h"
#include "common/model_config.h"

namespace benchd::client {
namespace {
using Align = Table::Align;

}  // namespace

std::string JobListView(const v1::ListJobsResponse& response) {
  if (response.jobs_size() == 0) return "no jobs\n";
  Table table({{"ID"},
               {"KIND"},
               {"STATE"},
               {"DEVICE"},
               {"SPEC"},
               {"CREATED (UTC)"},
               {"MEDIAN STEP ms", Align::kRight}});
  for (const v1::Job& job : response.jobs()) {
    const bool has_stats =
        job.result().has_benchmark() && job.result().benchmark().step().count() > 0;
    table.AddRow({job.id(), JobKindText(job), StateName(job.state()), JobDevicesText(job),
                  OrDash(ShortSpecSummary(job.spec())), FormatTime(job.created()),
                  has_stats ? FormatMs(job.result().benchmark().step().median()) : "-"});
  }
  return table.Render();
}

std::string ModelsView(const v1::ListModelsResponse& response) {
  if (response.models_size() == 0) return "no resident models\n";
  Table table({{"KEY"},
               {"DEVICE"},
               {"MODEL"},
               {"PRECISION"},
               {"PARAMS", Align::kRight},
               {"SIZE", Align::kRight},
               {"BUILD s", Align::kRight},
               {"USES", Align::kRight}});
  for (const v1::ResidentModel& m : response.models()) {
    table.AddRow({m.key(), OrDash(m.device()),
                  OrDash(m.model().preset().empty() ? "custom" : m.model().preset()),
                  PrecisionName(m.precision()), FormatThousands(m.parameter_count()),
                  FormatBytes(m.bytes()), fmt::format("{:.2f}", m.build_seconds()),
                  FormatThousands(m.uses())});
  }
  return table.Render();
}

std::string NodeView(const v1::NodeInfo& node) {
  std::string out = KeyValues({
      {"Host", OrDash(node.hostname())},
      {"Versions", FormatVersions(node.versions())},
      {"Data dir", OrDash(node.data_dir())},
      {"Metrics", OrDash(node.metrics_address())},
  });
  out += "\n";
  if (node.devices_size() == 0) return out + "no devices\n";
  Table table({{"DEVICE"},
               {"DESCRIPTION"},
               {"CC"},
               {"FREE GiB", Align::kRight},
               {"TOTAL GiB", Align::kRight},
               {"WORKER"},
               {"PID", Align::kRight},
               {"RESTARTS", Align::kRight}});
  for (const v1::Device& d : node.devices()) {
    table.AddRow({d.name(), OrDash(d.description()), OrDash(d.compute_capability()),
                  FormatGiB(d.free_memory_bytes()), FormatGiB(d.total_memory_bytes()),
                  WorkerStateName(d.worker_state()),
                  d.worker_pid() > 0 ? std::to_string(d.worker_pid()) : "-",
                  std::to_string(d.worker_restarts())});
  }
  out += table.Render();
  // Why a worker is not up, under the table (a sentence does not fit a column).
  for (const v1::Device& d : node.devices()) {
    if (!d.worker_detail().empty()) out += d.name() + ": worker " + d.worker_detail() + "\n";
  }
  return out;
}

namespace {
std::string NodeStateName(v1::NodeState state) {
  switch (state) {
    case v1::NODE_STATE_READY:
      return "READY";
    case v1::NODE_STATE_WAITING:
      return "WAITING";
    case v1::NODE_STATE_LOST:
      return "LOST";
    default:
      return "-";
  }
}
}  // namespace

int ReadyNodes(const v1::ListNodesResponse& nodes) {
  int ready = 0;
  for (const v1::ClusterNode& n : nodes.nodes()) ready += n.state() == v1::NODE_STATE_READY;
  return ready;
}

std::string NodesSummary(const v1::ListNodesResponse& nodes) {
  std::string out = fmt::format("{} of {} nodes READY", ReadyNodes(nodes), nodes.expected_nodes());
  std::string why;
  for (const v1::ClusterNode& n : nodes.nodes()) {
    if (n.state() == v1::NODE_STATE_READY) continue;
    why += fmt::format("{}{} {}: {}", why.empty() ? "" : "; ",
                       n.name().empty() ? fmt::format("rank {}", n.rank()) : n.name(),
                       NodeStateName(n.state()), OrDash(n.detail()));
  }
  return why.empty() ? out : out + " (" + why + ")";
}

std::string NodesView(const v1::ListNodesResponse& nodes) {
  std::string out;
  if (!nodes.coordinator().empty()) {
    out += KeyValues({{"Coordinator", nodes.coordinator()}, {"Nodes", NodesSummary(nodes)}}) + "\n";
  }
  Table table({{"NODE"},
               {"RANK", Align::kRight},
               {"STATE"},
               {"ADDRESS"},
               {"HOST"},
               {"DEVICES"},
               {"BENCHD"},
               {"HEARD (UTC)"}});
  for (const v1::ClusterNode& n : nodes.nodes()) {
    std::string devices;
    for (const v1::Device& d : n.devices()) {
      devices += fmt::format("{}{}{}", devices.empty() ? "" : ",", d.name(),
                             d.worker_state() == v1::WORKER_STATE_UP
                                 ? ""
                                 : "(" + WorkerStateName(d.worker_state()) + ")");
    }
    table.AddRow({OrDash(n.name()) + (n.self() ? " *" : ""), std::to_string(n.rank()),
                  NodeStateName(n.state()), OrDash(n.address()), OrDash(n.hostname()),
                  OrDash(devices), OrDash(n.versions().benchd()),
                  n.has_last_heartbeat() ? FormatTime(n.last_heartbeat()) : "-"});
  }
  out += table.Render();
  for (const v1::ClusterNode& n : nodes.nodes()) {
    if (n.state() != v1::NODE_STATE_READY && !n.detail().empty()) {
      out += fmt::format("{}: {}\n", n.name().empty() ? fmt::format("rank {}", n.rank()) : n.name(),
                         n.detail());
    }
  }
  return out + "(* the node that answered)\n";
}

}  // namespace benchd::client
