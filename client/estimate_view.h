// `benchctl estimate`'s tables: a MemoryEstimate's terms with their bytes,
// per-device share and formula, its phases and what it leaves out.
#ifndef BENCHD_CLIENT_ESTIMATE_VIEW_H_
#define BENCHD_CLIENT_ESTIMATE_VIEW_H_

#include <string>

#include "benchd/v1/bench.pb.h"

namespace benchd::client {

std::string EstimateView(const v1::MemoryEstimate& estimate);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_ESTIMATE_VIEW_H_
