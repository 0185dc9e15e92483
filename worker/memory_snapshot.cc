#include "worker/memory_snapshot.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace benchd::worker {
namespace {

using c10::IValue;

// A parse error with the path of the offending value.
struct BadSnapshot {
  std::string message;
};

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw BadSnapshot{absl::StrCat("memory snapshot: ", path, ": ", what)};
}

std::string TypeName(const IValue& v) {
  if (v.isNone()) return "None";
  return v.tagKind();
}

using Dict = c10::Dict<IValue, IValue>;

Dict AsDict(const IValue& v, const std::string& path) {
  if (!v.isGenericDict()) Fail(path, absl::StrCat("expected a dict, got ", TypeName(v)));
  return v.toGenericDict();
}

c10::ArrayRef<IValue> AsList(const IValue& v, const std::string& path) {
  if (!v.isList()) Fail(path, absl::StrCat("expected a list, got ", TypeName(v)));
  return v.toListRef();
}

const IValue* Find(const Dict& d, const char* key) {
  auto it = d.find(IValue(std::string(key)));
  return it == d.end() ? nullptr : &it->value();
}

IValue Get(const Dict& d, const char* key, const std::string& path) {
  const IValue* v = Find(d, key);
  if (v == nullptr) Fail(path, absl::StrCat("no key '", key, "'"));
  return *v;
}

int64_t Int(const Dict& d, const char* key, const std::string& path) {
  const IValue v = Get(d, key, path);
  if (v.isInt()) return v.toInt();
  if (v.isBool()) return v.toBool() ? 1 : 0;
  Fail(absl::StrCat(path, ".", key), absl::StrCat("expected an int, got ", TypeName(v)));
}

std::string Str(const Dict& d, const char* key, const std::string& path) {
  const IValue v = Get(d, key, path);
  if (!v.isString()) {
    Fail(absl::StrCat(path, ".", key), absl::StrCat("expected a str, got ", TypeName(v)));
  }
  return v.toStringRef();
}

memory::Action ParseAction(const std::string& a) {
  using memory::Action;
  if (a == "alloc") return Action::kAlloc;
  if (a == "free_requested") return Action::kFreeRequested;
  if (a == "free_completed") return Action::kFreeCompleted;
  if (a == "segment_alloc") return Action::kSegmentAlloc;
  if (a == "segment_free") return Action::kSegmentFree;
  if (a == "segment_map") return Action::kSegmentMap;
  if (a == "segment_unmap") return Action::kSegmentUnmap;
  if (a == "snapshot") return Action::kSnapshot;
  if (a == "oom") return Action::kOom;
  return Action::kOther;
}

class Parser {
 public:
  memory::Snapshot Parse(const IValue& root) {
    memory::Snapshot s;
    const Dict top = AsDict(root, "snapshot");
    auto segments = AsList(Get(top, "segments", "snapshot"), "segments");
    for (size_t i = 0; i < segments.size(); ++i) {
      const std::string path = absl::StrCat("segments[", i, "]");
      const Dict seg = AsDict(segments[i], path);
      memory::Segment out;
      out.device = static_cast<int>(Int(seg, "device", path));
      out.address = Int(seg, "address", path);
      out.total_size = Int(seg, "total_size", path);
      auto blocks = AsList(Get(seg, "blocks", path), path + ".blocks");
      for (size_t j = 0; j < blocks.size(); ++j) {
        const std::string bpath = absl::StrCat(path, ".blocks[", j, "]");
        const Dict b = AsDict(blocks[j], bpath);
        out.blocks.push_back({Int(b, "size", bpath),
                              Find(b, "requested_size") ? Int(b, "requested_size", bpath) : 0,
                              Str(b, "state", bpath)});
      }
      s.segments.push_back(std::move(out));
    }
    auto traces = AsList(Get(top, "device_traces", "snapshot"), "device_traces");
    for (size_t d = 0; d < traces.size(); ++d) {
      const std::string dpath = absl::StrCat("device_traces[", d, "]");
      auto entries = AsList(traces[d], dpath);
      std::vector<memory::TraceEvent> events;
      events.reserve(entries.size());
      for (size_t i = 0; i < entries.size(); ++i) {
        const std::string path = absl::StrCat(dpath, "[", i, "]");
        const Dict e = AsDict(entries[i], path);
        memory::TraceEvent ev;
        ev.action = ParseAction(Str(e, "action", path));
        if (ev.action == memory::Action::kOom) {
          ev.device_free = Int(e, "device_free", path);
        } else {
          ev.addr = Int(e, "addr", path);
        }
        ev.size = Int(e, "size", path);
        ev.time_us = Int(e, "time_us", path);
        if (const IValue* f = Find(e, "frames")) ev.frames = Frames(*f, path + ".frames");
        events.push_back(std::move(ev));
      }
      s.device_traces.push_back(std::move(events));
    }
    // Older snapshots have no annotations; torch 2.11's always do (maybe empty).
    if (const IValue* ann = Find(top, "external_annotations")) {
      auto list = AsList(*ann, "external_annotations");
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string path = absl::StrCat("external_annotations[", i, "]");
        const Dict a = AsDict(list[i], path);
        // Annotations other than RecordFunction scopes carry other keys.
        if (!Find(a, "name") || !Find(a, "stage")) continue;
        memory::Annotation out;
        out.name = Str(a, "name", path);
        out.start = Str(a, "stage", path) == "START";
        out.device = static_cast<int>(Int(a, "device", path));
        out.time_us = Int(a, "time_us", path);
        s.annotations.push_back(std::move(out));
      }
    }
    return s;
  }

 private:
  // Identical stacks become one shared vector. LibTorch symbolizes each
  // allocation's traceback into a list of its own, but the frame dicts in
  // them are shared (one per distinct frame, memoized by the pickler), so a
  // list's key is the sequence of its frames' identities: the same call path
  // in two steps is one stack, which is what groups the largest allocations.
  memory::Frames Frames(const IValue& v, const std::string& path) {
    if (!v.isList()) Fail(path, absl::StrCat("expected a list, got ", TypeName(v)));
    auto list = v.toListRef();
    std::string key;
    key.reserve(list.size() * sizeof(void*));
    for (const IValue& f : list) {
      const void* p = f.isGenericDict() ? f.internalToPointer() : nullptr;
      key.append(reinterpret_cast<const char*>(&p), sizeof p);
    }
    if (auto it = frames_.find(key); it != frames_.end()) return it->second;
    auto out = std::make_shared<std::vector<memory::Frame>>();
    out->reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string fpath = absl::StrCat(path, "[", i, "]");
      const Dict f = AsDict(list[i], fpath);
      out->push_back({Str(f, "name", fpath), Str(f, "filename", fpath), Int(f, "line", fpath)});
    }
    memory::Frames shared = std::move(out);
    frames_.emplace(std::move(key), shared);
    keep_.push_back(v);  // its frames' addresses stay valid (and unique) while it lives
    return shared;
  }

  std::unordered_map<std::string, memory::Frames> frames_;
  std::vector<IValue> keep_;
};

}  // namespace

absl::StatusOr<memory::Snapshot> ParseSnapshotPickle(const std::string& bytes) {
  IValue root;
  try {
    root = torch::jit::unpickle(bytes.data(), bytes.size());
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory snapshot: not a readable pickle: ", e.what_without_backtrace()));
  }
  try {
    return Parser().Parse(root);
  } catch (const BadSnapshot& e) {
    return absl::InvalidArgumentError(e.message);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory snapshot: ", e.what_without_backtrace()));
  }
}

}  // namespace benchd::worker
