// How each call of the daemon's services is admitted and routed, in one
// table beside the proto: the role its caller needs and, for a call about
// one job or device, the request field that names it. A name with another
// member's prefix ("node1/7", "node1/cuda:0") sends the call to that member
// with the field rewritten to the member's own name (server/cluster/forwarding.h).
// BenchService's one gate (bench_service.cc, Gate) applies it to every call;
// call_policy_test walks the service descriptors so that a new RPC without
// an entry fails the tests.
#ifndef BENCHD_SERVER_SECURITY_CALL_POLICY_H_
#define BENCHD_SERVER_SECURITY_CALL_POLICY_H_

#include <string>

#include "absl/strings/string_view.h"
#include "benchd/v1/bench.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace benchd::server {

struct CallPolicy {
  absl::string_view method;  // "Submit"; node-to-node calls "Cluster.Heartbeat", "Node.Run"
  v1::Role role;             // what the caller needs (CancelJob: more for another's job)
  // The dotted path of the string field that names the call's job or device
  // ("job_id", "spec.device"); empty: always served here.
  absl::string_view route_field;
};

// The entry of `method` (a benchd.v1.Bench method's name, or "Cluster.*" /
// "Node.*" for the internal services); nullptr when there is none.
const CallPolicy* FindCallPolicy(absl::string_view method);

// The benchd.v1.Bench method whose request is `request_type` (every method
// has a request type of its own); nullptr when none.
const google::protobuf::MethodDescriptor* BenchMethodFor(
    const google::protobuf::Descriptor* request_type);

// The route field's value in `request` ("" when the policy has none, or the
// field is unset) and, for a forwarded copy, the field rewritten.
std::string RouteName(const google::protobuf::Message& request, const CallPolicy& policy);
void SetRouteName(google::protobuf::Message* request, const CallPolicy& policy,
                  const std::string& name);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_SECURITY_CALL_POLICY_H_
