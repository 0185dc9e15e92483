// gRPC server reflection (v1alpha, what grpcurl and grpc_cli use) restricted
// to the public API: benchd.v1.Bench's file and the files it imports. gRPC's
// own reflection plugin answers for every descriptor linked into the
// process, which in the daemon includes benchd.internal.Worker; a client of
// the public port has no business with that service.
#ifndef BENCHD_SERVER_API_PUBLIC_REFLECTION_H_
#define BENCHD_SERVER_API_PUBLIC_REFLECTION_H_

#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace benchd::server {

class PublicReflection final : public grpc::reflection::v1alpha::ServerReflection::CallbackService {
 public:
  // Serves the services of `files` (and what they import), listing
  // `service_names` (those of `files`, plus e.g. grpc.health.v1.Health).
  PublicReflection(std::vector<const google::protobuf::FileDescriptor*> files,
                   std::vector<std::string> service_names);

  grpc::ServerBidiReactor<grpc::reflection::v1alpha::ServerReflectionRequest,
                          grpc::reflection::v1alpha::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

  // One request's answer; public for tests.
  grpc::reflection::v1alpha::ServerReflectionResponse Answer(
      const grpc::reflection::v1alpha::ServerReflectionRequest& request) const;

 private:
  const google::protobuf::FileDescriptor* Served(const google::protobuf::FileDescriptor* f) const;

  std::set<std::string> served_files_;  // names of `files` and their imports
  std::vector<std::string> service_names_;
};

// The daemon's: benchd/v1/bench.proto, listing benchd.v1.Bench, the health
// service and this one.
PublicReflection* NewPublicReflection();

}  // namespace benchd::server

#endif  // BENCHD_SERVER_API_PUBLIC_REFLECTION_H_
