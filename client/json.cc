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

std::string ToJsonField(const std::string& name,
                        const std::vector<const google::protobuf::Message*>& messages) {
  // The name is one of ours (a plain identifier): no escaping needed.
  if (messages.empty()) return "{\n \"" + name + "\": []\n}\n";
  std::string out = "{\n \"" + name + "\": [\n";
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string item = Print(*messages[i], true);
    item.pop_back();  // its '\n'
    // Two levels in: the array is one level, the field's object another.
    out += "  ";
    for (char c : item) {
      out += c;
      if (c == '\n') out += "  ";
    }
    out += i + 1 < messages.size() ? ",\n" : "\n";
  }
  return out + " ]\n}\n";
}

}  // namespace benchd::client
