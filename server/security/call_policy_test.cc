#include "server/security/call_policy.h"

#include <set>
#include <string>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::DynamicMessageFactory;
using google::protobuf::ServiceDescriptor;

const ServiceDescriptor* Service(const std::string& name) {
  return DescriptorPool::generated_pool()->FindServiceByName(name);
}

// A new RPC without an entry fails here, not in production: every method of
// the public and the node-to-node services has a role.
TEST(CallPolicyTest, EveryMethodHasAPolicyWithARole) {
  std::set<std::string> methods;
  for (const auto& [service, prefix] : {std::pair<std::string, std::string>{"benchd.v1.Bench", ""},
                                        {"benchd.internal.Cluster", "Cluster."},
                                        {"benchd.internal.Node", "Node."}}) {
    const ServiceDescriptor* s = Service(service);
    ASSERT_NE(s, nullptr) << service;
    for (int i = 0; i < s->method_count(); ++i) {
      const std::string name = prefix + s->method(i)->name();
      methods.insert(name);
      const CallPolicy* policy = FindCallPolicy(name);
      ASSERT_NE(policy, nullptr) << name
                                 << " has no entry in server/security/call_policy.cc: add one";
      EXPECT_NE(policy->role, v1::ROLE_UNSPECIFIED) << name;
      EXPECT_EQ(policy->method, name);
    }
  }
  EXPECT_GE(methods.size(), 20u);
  EXPECT_EQ(FindCallPolicy("NoSuchMethod"), nullptr);
  EXPECT_EQ(FindCallPolicy("Submit")->role, v1::ROLE_SUBMIT);
  EXPECT_EQ(FindCallPolicy("DestroyGroup")->role, v1::ROLE_ADMIN);
}

// The gate finds a call's policy by its request type: each Bench method has
// a request of its own (AIP-126), and each is found.
TEST(CallPolicyTest, EveryBenchMethodIsFoundByItsRequestType) {
  const ServiceDescriptor* bench = Service("benchd.v1.Bench");
  for (int i = 0; i < bench->method_count(); ++i) {
    const auto* method = bench->method(i);
    EXPECT_EQ(BenchMethodFor(method->input_type()), method)
        << method->name() << "'s request " << method->input_type()->full_name()
        << " is shared with another method: give it a request of its own";
  }
  EXPECT_EQ(BenchMethodFor(v1::Job::descriptor()), nullptr);
}

// Each route field is a string field of the method's request, read and
// written through the same path; a method about one job (a top-level
// job_id) routes by it, so a new job-scoped call reaches the job's member.
TEST(CallPolicyTest, RouteFieldsNameAStringFieldOfTheRequest) {
  const ServiceDescriptor* bench = Service("benchd.v1.Bench");
  DynamicMessageFactory factory;
  int routed = 0;
  for (int i = 0; i < bench->method_count(); ++i) {
    const auto* method = bench->method(i);
    const CallPolicy* policy = FindCallPolicy(method->name());
    ASSERT_NE(policy, nullptr);
    if (method->input_type()->FindFieldByName("job_id") != nullptr) {
      EXPECT_EQ(policy->route_field, "job_id") << method->name();
    }
    if (policy->route_field.empty()) continue;
    ++routed;
    std::unique_ptr<google::protobuf::Message> request(
        factory.GetPrototype(method->input_type())->New());
    EXPECT_EQ(RouteName(*request, *policy), "") << method->name();
    SetRouteName(request.get(), *policy, "node1/7");
    EXPECT_EQ(RouteName(*request, *policy), "node1/7")
        << method->name() << ": route field " << policy->route_field << " is not a string field of "
        << method->input_type()->full_name();
  }
  EXPECT_EQ(routed, 7);  // Submit, Watch, GetJob, ListJobs, CancelJob, ListArtifacts, FetchArtifact
  v1::SubmitRequest submit;
  submit.mutable_spec()->set_device("node1/cuda:0");
  EXPECT_EQ(RouteName(submit, *FindCallPolicy("Submit")), "node1/cuda:0");
}

}  // namespace
}  // namespace benchd::server
