#include "server/core/timestamp.h"

#include <chrono>
#include <cstdint>

namespace benchd::server {

// Not TimeUtil::GetCurrentTime: protobuf 3.21's has whole seconds only.
google::protobuf::Timestamp Now() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  google::protobuf::Timestamp t;
  t.set_seconds(ns / 1000000000);
  t.set_nanos(static_cast<int32_t>(ns % 1000000000));
  return t;
}

}  // namespace benchd::server
