#include "worker/kineto_session.h"

#include <ActivityType.h>

#include <unordered_map>
#include <utility>

namespace benchd::worker {

std::vector<ProfileEvent> FlattenProfile(const std::vector<std::shared_ptr<prof::Result>>& tree) {
  std::vector<ProfileEvent> events;
  std::unordered_map<const prof::Result*, int> index;
  std::vector<std::pair<const prof::Result*, int>> stack;  // (result, parent index)
  auto visit_from = [&](const prof::Result* top) {
    stack.push_back({top, -1});
    while (!stack.empty()) {
      auto [r, parent] = stack.back();
      stack.pop_back();
      if (!index.try_emplace(r, -1).second) continue;
      ProfileEvent e;
      bool keep = true;
      switch (r->tag()) {
        case prof::EventType::TorchOp: {
          const auto& op = std::get<prof::ExtraFields<prof::EventType::TorchOp>>(r->extra_fields_);
          e.kind = op.scope_ == at::RecordScope::USER_SCOPE ? ProfileEvent::Kind::kRange
                                                            : ProfileEvent::Kind::kOperator;
          break;
        }
        case prof::EventType::Kineto:
          // Kineto also reports the named ranges as spans on the device
          // (GPU_USER_ANNOTATION) and CUPTI's own overhead: neither is work
          // of the device, and counting them would count kernels twice.
          switch (r->kinetoType()) {
            case libkineto::ActivityType::CUDA_RUNTIME:
            case libkineto::ActivityType::CUDA_DRIVER:
              e.kind = ProfileEvent::Kind::kRuntime;
              break;
            case libkineto::ActivityType::CONCURRENT_KERNEL:
            case libkineto::ActivityType::GPU_MEMCPY:
            case libkineto::ActivityType::GPU_MEMSET:
              e.kind = ProfileEvent::Kind::kDevice;
              break;
            default:
              keep = false;
          }
          break;
        default:
          keep = false;
      }
      int self = parent;
      if (keep) {
        e.name = r->name();
        e.start_ns = r->start_time_ns_;
        e.end_ns = r->endTimeNS();
        e.thread = r->start_tid_;
        e.parent = parent;
        self = static_cast<int>(events.size());
        events.push_back(std::move(e));
      }
      index[r] = self;
      for (auto it = r->children_.rbegin(); it != r->children_.rend(); ++it) {
        stack.push_back({it->get(), self});
      }
    }
  };
  for (const auto& r : tree) {
    const prof::Result* top = r.get();
    while (auto p = top->parent_.lock()) top = p.get();
    if (!index.count(top)) visit_from(top);
  }
  // A kernel's runtime call sits in the tree where its timestamps nest it, and
  // CUPTI's host clock is not the operators' clock: a call at the edge of a
  // short range (attention.scores) can nest just outside it. Kineto also links
  // each kernel to the operator that launched it by correlation id (the
  // operator innermost at the launch): that link decides the call's operator.
  for (const auto& [r, i] : index) {
    if (i < 0 || r->tag() != prof::EventType::Kineto ||
        events[i].kind != ProfileEvent::Kind::kDevice) {
      continue;
    }
    const int call = events[i].parent;
    if (call < 0 || events[call].kind != ProfileEvent::Kind::kRuntime) continue;
    const auto& kineto = std::get<prof::ExtraFields<prof::EventType::Kineto>>(r->extra_fields_);
    const auto linked = kineto.linked_activity_.lock();
    if (!linked || linked->tag() != prof::EventType::TorchOp) continue;
    const auto op = index.find(linked.get());
    if (op != index.end() && op->second >= 0 && events[op->second].thread == events[call].thread) {
      events[call].parent = op->second;
    }
  }
  return events;
}

}  // namespace benchd::worker
