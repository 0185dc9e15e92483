// The gRPC health service's names and what they answer: each device's worker
// under "benchd.v1.Bench/<device>" (SERVING while it is UP), and the node
// under "" and "benchd.v1.Bench" (SERVING while every device's is). So a
// Kubernetes gRPC probe or grpc_health_probe asking for "benchd.v1.Bench"
// sees a node that cannot run work on all its devices as NOT_SERVING, and a
// finer probe can ask for one device.
#ifndef BENCHD_SERVER_API_HEALTH_H_
#define BENCHD_SERVER_API_HEALTH_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace benchd::server {

inline constexpr char kBenchServiceName[] = "benchd.v1.Bench";

// "benchd.v1.Bench/cuda:0".
std::string DeviceHealthName(const std::string& device);

class NodeHealth {
 public:
  // `publish(name, serving)` sets one name's status (the gRPC health
  // service's SetServingStatus); it is called for every name at once (all
  // NOT_SERVING: no worker is up yet) and then on every change.
  using Publish = std::function<void(const std::string& name, bool serving)>;
  NodeHealth(std::vector<std::string> devices, Publish publish);

  // `device`'s worker started or stopped serving.
  void Set(const std::string& device, bool serving);

 private:
  std::mutex mu_;
  std::map<std::string, bool> serving_;
  bool node_serving_ = false;
  Publish publish_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_API_HEALTH_H_
