#include "server/jobs/job_summary.h"

#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace benchd::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Repeated fields go; singular messages are walked, except a resolved spec
// (small, and what the figures mean).
void DropArrays(Message* m) {
  const google::protobuf::Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->is_repeated()) {
      r->ClearField(m, f);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && f->name() != "spec") {
      DropArrays(r->MutableMessage(m, f));
    }
  }
}

}  // namespace

void SummarizeResult(v1::JobResult* result) { DropArrays(result); }

v1::Job SummarizeJob(v1::Job job) {
  if (job.has_result()) SummarizeResult(job.mutable_result());
  job.set_summary(true);
  return job;
}

}  // namespace benchd::server
