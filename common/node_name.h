// The one rule for a cluster member's name (--node-name; "node<rank>" by
// default): a DNS label, 1..63 of a-z, 0-9 and '-', starting with a letter.
// It prefixes another member's device names and job ids ("node1/cuda:0",
// "node1/7"), and names the folder a member's forwarded runs write their
// artifacts to on another node (common/artifacts.h): never all digits, so
// never a job id.
#ifndef BENCHD_COMMON_NODE_NAME_H_
#define BENCHD_COMMON_NODE_NAME_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace benchd {

bool IsNodeName(absl::string_view name);
// OK, or INVALID_ARGUMENT naming `field`, quoting what came and saying what a
// name is.
absl::Status CheckNodeName(absl::string_view field, absl::string_view name);

}  // namespace benchd

#endif  // BENCHD_COMMON_NODE_NAME_H_
