#include "client/json.h"

#include <google/protobuf/util/json_util.h>

namespace benchd::client {
namespace {

std::string Print(const google::protobuf::Message& message, bool indent) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = indent;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = false;
  std::string out;
  // Serializing a valid in-memory message cannot fail for our types (no Any).
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out + "\n";
}

}  // namespace

std::string ToJson(const google::protobuf::Message& message) { return Print(message, true); }
std::string ToJsonLine(const google::protobuf::Message& message) { return Print(message, false); }

}  // namespace benchd::client
