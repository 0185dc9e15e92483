// The wall clock as a protobuf Timestamp, for jobs', groups' and members'
// times (created, started, finished, last heard).
#ifndef BENCHD_SERVER_CORE_TIMESTAMP_H_
#define BENCHD_SERVER_CORE_TIMESTAMP_H_

#include "google/protobuf/timestamp.pb.h"

namespace benchd::server {

// Now, to the nanosecond.
google::protobuf::Timestamp Now();

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CORE_TIMESTAMP_H_
