// For tests: every string field and every list (repeated field) reachable
// from a request message, found through its descriptor, so a field added
// later is walked too; and setters that put a value of a given size there.
#ifndef BENCHD_COMMON_SIZE_FIELDS_TEST_UTIL_H_
#define BENCHD_COMMON_SIZE_FIELDS_TEST_UTIL_H_

#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace benchd::testing {

using FieldPath = std::vector<const google::protobuf::FieldDescriptor*>;

namespace internal {
inline void CollectSizeFields(const google::protobuf::Descriptor* type, FieldPath* prefix,
                              std::set<const google::protobuf::Descriptor*>* on_path,
                              std::vector<FieldPath>* out) {
  using google::protobuf::FieldDescriptor;
  if (!on_path->insert(type).second) return;  // a recursive type: once per path
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* f = type->field(i);
    prefix->push_back(f);
    if (f->is_repeated() || f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      out->push_back(*prefix);
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map()) {
      CollectSizeFields(f->message_type(), prefix, on_path, out);
    }
    prefix->pop_back();
  }
  on_path->erase(type);
}
}  // namespace internal

// Every path from `type` to a string or repeated field, nested messages and
// lists included (a repeated message is both a list and a way further in).
inline std::vector<FieldPath> SizeFieldPaths(const google::protobuf::Descriptor* type) {
  std::vector<FieldPath> out;
  FieldPath prefix;
  std::set<const google::protobuf::Descriptor*> on_path;
  internal::CollectSizeFields(type, &prefix, &on_path, &out);
  return out;
}

// The message holding the last field of `path`, made on the way (a repeated
// message on the way gets one element); `text` gets the path as the checks
// name it up to that message: "collective.targets[0].".
inline google::protobuf::Message* MakePathTo(google::protobuf::Message* m, const FieldPath& path,
                                             std::string* text) {
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const google::protobuf::FieldDescriptor* f = path[i];
    const google::protobuf::Reflection* r = m->GetReflection();
    *text += f->name() + (f->is_repeated() ? "[0]." : ".");
    m = f->is_repeated() ? r->AddMessage(m, f) : r->MutableMessage(m, f);
  }
  return m;
}

// Sets the string at `path` (a list of strings: its first element) to
// `bytes` bytes; returns the path as the checks name it ("job_id",
// "collective.targets[0].devices[0]").
inline std::string SetStringAt(google::protobuf::Message* m, const FieldPath& path, size_t bytes) {
  std::string text;
  m = MakePathTo(m, path, &text);
  const google::protobuf::FieldDescriptor* f = path.back();
  text += f->name();
  if (f->is_repeated()) {
    text += "[0]";
    m->GetReflection()->AddString(m, f, std::string(bytes, 'x'));
  } else {
    m->GetReflection()->SetString(m, f, std::string(bytes, 'x'));
  }
  return text;
}

// Adds `n` entries (empty messages, "x", 0 or the enum's first value) to the
// list at `path`; returns the list's path as the checks name it.
inline std::string AddEntriesAt(google::protobuf::Message* m, const FieldPath& path, int n) {
  using google::protobuf::FieldDescriptor;
  std::string text;
  m = MakePathTo(m, path, &text);
  const FieldDescriptor* f = path.back();
  const google::protobuf::Reflection* r = m->GetReflection();
  for (int i = 0; i < n; ++i) {
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        r->AddMessage(m, f);
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        r->AddString(m, f, "x");
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        r->AddInt32(m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->AddInt64(m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        r->AddUInt32(m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        r->AddUInt64(m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        r->AddDouble(m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        r->AddFloat(m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        r->AddBool(m, f, false);
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        r->AddEnumValue(m, f, 0);
        break;
    }
  }
  return text + f->name();
}

// The request types of `service`'s methods.
inline std::vector<const google::protobuf::Descriptor*> RequestTypes(
    const google::protobuf::ServiceDescriptor* service) {
  std::vector<const google::protobuf::Descriptor*> out;
  for (int i = 0; i < service->method_count(); ++i) out.push_back(service->method(i)->input_type());
  return out;
}

}  // namespace benchd::testing

#endif  // BENCHD_COMMON_SIZE_FIELDS_TEST_UTIL_H_
