// Tables for `list`, `models` and `node`.
#ifndef BENCHD_CLIENT_LIST_VIEWS_H_
#define BENCHD_CLIENT_LIST_VIEWS_H_

#include <string>

#include "benchd/v1/bench.pb.h"

namespace benchd::client {

// id, kind, state, device, model/mode/precision, created (UTC), median step ms.
std::string JobListView(const v1::ListJobsResponse& response);
// key, device, model, precision, params, size (parameters + optimizer state), build s, uses.
std::string ModelsView(const v1::ListModelsResponse& response);
// Host, versions, data dir, metrics, then a table of devices and their workers.
std::string NodeView(const v1::NodeInfo& node);
// `benchctl nodes`: the cluster's members, one row each, then why any is not
// READY.
std::string NodesView(const v1::ListNodesResponse& nodes);
// "2 of 3 nodes READY (node2 WAITING: not heard from yet)".
std::string NodesSummary(const v1::ListNodesResponse& nodes);
int ReadyNodes(const v1::ListNodesResponse& nodes);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_LIST_VIEWS_H_
