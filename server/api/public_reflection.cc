#include "server/api/public_reflection.h"

#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "benchd/v1/bench.pb.h"
#include "google/protobuf/descriptor.pb.h"

namespace benchd::server {
namespace {

using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;
namespace pb = google::protobuf;

void AddWithImports(const pb::FileDescriptor* file, std::set<std::string>* names) {
  if (!names->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) AddWithImports(file->dependency(i), names);
}

// The file and its imports, each once, imports first.
void Serialize(const pb::FileDescriptor* file, std::set<std::string>* seen,
               grpc::reflection::v1alpha::FileDescriptorResponse* out) {
  if (!seen->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) Serialize(file->dependency(i), seen, out);
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
}

void SetError(grpc::StatusCode code, const std::string& message, ServerReflectionResponse* out) {
  out->mutable_error_response()->set_error_code(code);
  out->mutable_error_response()->set_error_message(message);
}

// Answers each request in turn: one write in flight, reads paused meanwhile.
class Stream final
    : public grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse> {
 public:
  explicit Stream(const PublicReflection* service) : service_(service) { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);  // the client closed its side
      return;
    }
    response_ = service_->Answer(request_);
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  const PublicReflection* const service_;
  ServerReflectionRequest request_;
  ServerReflectionResponse response_;
};

}  // namespace

PublicReflection::PublicReflection(std::vector<const pb::FileDescriptor*> files,
                                   std::vector<std::string> service_names)
    : service_names_(std::move(service_names)) {
  for (const pb::FileDescriptor* f : files) AddWithImports(f, &served_files_);
}

const pb::FileDescriptor* PublicReflection::Served(const pb::FileDescriptor* f) const {
  return f != nullptr && served_files_.count(f->name()) ? f : nullptr;
}

ServerReflectionResponse PublicReflection::Answer(const ServerReflectionRequest& request) const {
  ServerReflectionResponse out;
  out.set_valid_host(request.host());
  *out.mutable_original_request() = request;
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  const pb::FileDescriptor* file = nullptr;
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kListServices:
      for (const auto& name : service_names_) {
        out.mutable_list_services_response()->add_service()->set_name(name);
      }
      return out;
    case ServerReflectionRequest::kFileByFilename:
      file = Served(pool->FindFileByName(request.file_by_filename()));
      if (file == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("file not found: ", request.file_by_filename()), &out);
        return out;
      }
      break;
    case ServerReflectionRequest::kFileContainingSymbol:
      file = Served(pool->FindFileContainingSymbol(request.file_containing_symbol()));
      if (file == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("symbol not found: ", request.file_containing_symbol()), &out);
        return out;
      }
      break;
    case ServerReflectionRequest::kFileContainingExtension:
    case ServerReflectionRequest::kAllExtensionNumbersOfType:
      // The public API (proto3) declares no extensions.
      SetError(grpc::StatusCode::NOT_FOUND, "this server's API has no extensions", &out);
      return out;
    default:
      SetError(grpc::StatusCode::INVALID_ARGUMENT,
               "expected one of list_services, file_by_filename, file_containing_symbol", &out);
      return out;
  }
  std::set<std::string> seen;
  Serialize(file, &seen, out.mutable_file_descriptor_response());
  return out;
}

grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse>*
PublicReflection::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new Stream(this);
}

PublicReflection* NewPublicReflection() {
  return new PublicReflection(
      {v1::Job::descriptor()->file()},
      {"benchd.v1.Bench", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"});
}

}  // namespace benchd::server
