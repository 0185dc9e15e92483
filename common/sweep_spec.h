// A sweep of one request (v1::SweepSpec): its checks and its expansion into
// cells, each the request with the axes' values set. Torch-free: the daemon
// checks and expands at Submit and again when it runs the job; benchctl
// parses its --sweep flags with the same field walk.
#ifndef BENCHD_COMMON_SWEEP_SPEC_H_
#define BENCHD_COMMON_SWEEP_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "benchd/v1/bench.pb.h"

namespace benchd {

// One cell of a sweep: its values (canonical text, one per axis) and the
// request with them set, resolved (ResolveJobSpec), without the sweep; its
// device and progress deadline are the job's.
struct SweepCellSpec {
  std::vector<std::string> values;
  v1::JobSpec spec;
};

// Checks spec.sweep against the spec's kind (INVALID_ARGUMENT naming
// "sweep.axes[i].field" or "sweep.axes[i].values[j]", what came and what is
// accepted): at least one axis; each field a singular scalar of the kind's
// message, given once; each value parses for the field's type and appears
// once; the product within kMaxSweepCells; cell_timeout_seconds 1..86400
// when set. Collective requests are refused (they sweep their own lists).
// Then every cell must resolve (ResolveJobSpec); the first that does not is
// refused naming the cell ("sweep cell 3 (precision=bf16, model.preset=xl):
// benchmark.…"). Returns the cells in run order (first axis outermost).
absl::StatusOr<std::vector<SweepCellSpec>> ExpandSweep(const v1::JobSpec& spec);

// "precision=bf16, model.preset=small": a cell's label for messages and logs.
std::string SweepCellLabel(const v1::SweepSpec& sweep, const std::vector<std::string>& values);

// The canonical text of `text` as a value of the kind's field `field`
// ("BF16" and "PRECISION_BF16" give "bf16"), or INVALID_ARGUMENT naming
// `where` with what the field accepts. benchctl uses it to check a --sweep
// flag before any RPC.
absl::StatusOr<std::string> CanonicalSweepValue(v1::JobSpec::KindCase kind, absl::string_view field,
                                                absl::string_view text, absl::string_view where);

}  // namespace benchd

#endif  // BENCHD_COMMON_SWEEP_SPEC_H_
