// For tests: every float and double field reachable from a request message,
// found through its descriptor, so a field added later is walked too.
#ifndef BENCHD_COMMON_NUMBER_FIELDS_TEST_UTIL_H_
#define BENCHD_COMMON_NUMBER_FIELDS_TEST_UTIL_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace benchd::testing {

using NumberFieldPath = std::vector<const google::protobuf::FieldDescriptor*>;

namespace internal {
inline void CollectNumberFields(const google::protobuf::Descriptor* type, NumberFieldPath* prefix,
                                std::set<const google::protobuf::Descriptor*>* on_path,
                                std::vector<NumberFieldPath>* out) {
  using google::protobuf::FieldDescriptor;
  if (!on_path->insert(type).second) return;  // a recursive type: once per path
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* f = type->field(i);
    prefix->push_back(f);
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE ||
        f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
      out->push_back(*prefix);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map()) {
      CollectNumberFields(f->message_type(), prefix, on_path, out);
    }
    prefix->pop_back();
  }
  on_path->erase(type);
}
}  // namespace internal

// Every path from `type` to a float or double field, nested messages and
// repeated fields included.
inline std::vector<NumberFieldPath> NumberFieldPaths(const google::protobuf::Descriptor* type) {
  std::vector<NumberFieldPath> out;
  NumberFieldPath prefix;
  std::set<const google::protobuf::Descriptor*> on_path;
  internal::CollectNumberFields(type, &prefix, &on_path, &out);
  return out;
}

// Sets the field at `path` of `m` to `v` (a repeated field gets one element),
// making the messages on the way; returns the path as the checks name it:
// "benchmark.model.rope_theta", "collective.targets[0].x".
inline std::string SetNumberAt(google::protobuf::Message* m, const NumberFieldPath& path,
                               double v) {
  using google::protobuf::FieldDescriptor;
  std::string text;
  for (size_t i = 0; i < path.size(); ++i) {
    const FieldDescriptor* f = path[i];
    const google::protobuf::Reflection* r = m->GetReflection();
    text += (i ? "." : "") + f->name();
    if (f->is_repeated()) text += "[0]";
    if (i + 1 < path.size()) {
      m = f->is_repeated() ? r->AddMessage(m, f) : r->MutableMessage(m, f);
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
      f->is_repeated() ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
    } else {
      f->is_repeated() ? r->AddFloat(m, f, static_cast<float>(v))
                       : r->SetFloat(m, f, static_cast<float>(v));
    }
  }
  return text;
}

}  // namespace benchd::testing

#endif  // BENCHD_COMMON_NUMBER_FIELDS_TEST_UTIL_H_
