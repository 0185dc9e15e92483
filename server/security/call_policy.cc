#include "server/security/call_policy.h"

#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"

namespace benchd::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::MethodDescriptor;

constexpr CallPolicy kCallPolicies[] = {
    {"Submit", v1::ROLE_SUBMIT, "spec.device"},
    {"Watch", v1::ROLE_READ, "job_id"},
    {"GetJob", v1::ROLE_READ, "job_id"},
    // Another member's device: that member's jobs on it.
    {"ListJobs", v1::ROLE_READ, "device"},
    // Cancelling another's job needs ROLE_ADMIN (BenchService::CancelJob).
    {"CancelJob", v1::ROLE_SUBMIT, "job_id"},
    {"ListModels", v1::ROLE_READ, ""},
    {"EvictModel", v1::ROLE_ADMIN, ""},
    {"GetNodeInfo", v1::ROLE_READ, ""},
    {"ListArtifacts", v1::ROLE_READ, "job_id"},
    {"FetchArtifact", v1::ROLE_READ, "job_id"},
    // A group spans members itself (server/jobs/group_registry.h): never forwarded.
    {"CreateGroup", v1::ROLE_ADMIN, ""},
    {"ListGroups", v1::ROLE_READ, ""},
    {"DestroyGroup", v1::ROLE_ADMIN, ""},
    {"Estimate", v1::ROLE_READ, ""},
    {"ListNodes", v1::ROLE_READ, ""},
    // Node to node (proto/benchd/internal/cluster.proto): members only.
    {"Cluster.Heartbeat", v1::ROLE_ADMIN, ""},
    {"Node.Run", v1::ROLE_ADMIN, ""},
    {"Node.PrepareGroup", v1::ROLE_ADMIN, ""},
    {"Node.JoinGroup", v1::ROLE_ADMIN, ""},
    {"Node.LeaveGroup", v1::ROLE_ADMIN, ""},
    {"Node.Kill", v1::ROLE_ADMIN, ""},
};

// The route field's parent message in `m` and the field itself; {nullptr,
// nullptr} when the path does not name a string field of m's type.
template <typename M>
std::pair<M*, const FieldDescriptor*> Walk(M* m, absl::string_view path) {
  std::vector<absl::string_view> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(std::string(parts[i]));
    if (f == nullptr || f->is_repeated()) return {nullptr, nullptr};
    if (i + 1 == parts.size()) {
      if (f->type() != FieldDescriptor::TYPE_STRING) return {nullptr, nullptr};
      return {m, f};
    }
    if (f->type() != FieldDescriptor::TYPE_MESSAGE) return {nullptr, nullptr};
    if constexpr (std::is_const_v<M>) {
      m = &m->GetReflection()->GetMessage(*m, f);
    } else {
      m = m->GetReflection()->MutableMessage(m, f);
    }
  }
  return {nullptr, nullptr};
}

}  // namespace

const CallPolicy* FindCallPolicy(absl::string_view method) {
  for (const CallPolicy& p : kCallPolicies) {
    if (p.method == method) return &p;
  }
  return nullptr;
}

const MethodDescriptor* BenchMethodFor(const Descriptor* request_type) {
  static const auto* const kByRequest = [] {
    auto* by = new std::map<const Descriptor*, const MethodDescriptor*>;
    const auto* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("benchd.v1.Bench");
    for (int i = 0; i < service->method_count(); ++i) {
      (*by)[service->method(i)->input_type()] = service->method(i);
    }
    return by;
  }();
  auto it = kByRequest->find(request_type);
  return it == kByRequest->end() ? nullptr : it->second;
}

std::string RouteName(const Message& request, const CallPolicy& policy) {
  if (policy.route_field.empty()) return "";
  auto [m, f] = Walk(&request, policy.route_field);
  return f == nullptr ? "" : m->GetReflection()->GetString(*m, f);
}

void SetRouteName(Message* request, const CallPolicy& policy, const std::string& name) {
  if (policy.route_field.empty()) return;
  auto [m, f] = Walk(request, policy.route_field);
  if (f != nullptr) m->GetReflection()->SetString(m, f, name);
}

}  // namespace benchd::server
