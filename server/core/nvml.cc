#include "server/core/nvml.h"

#include <dlfcn.h>

#include <fstream>
#include <map>
#include <tuple>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace benchd::server {
namespace {

// The few NVML declarations used, as nvml.h (CUDA 13) has them: declared
// here so that the build needs no nvml.h and links nothing.
using NvmlReturn = int;  // nvmlReturn_t
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE
using NvmlDevice = struct NvmlDeviceOpaque*;     // nvmlDevice_t
struct NvmlProcessInfo {                         // nvmlProcessInfo_t (the _v3 calls' entries)
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NVML_VALUE_NOT_AVAILABLE: all bits set
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using ErrorStringFn = const char* (*)(NvmlReturn);
using HandleByUuidFn = NvmlReturn (*)(const char*, NvmlDevice*);
using ProcessesFn = NvmlReturn (*)(NvmlDevice, unsigned int*, NvmlProcessInfo*);

class Nvml final : public GpuProcessSource {
 public:
  struct Functions {
    InitFn init = nullptr;
    ShutdownFn shutdown = nullptr;
    ErrorStringFn error_string = nullptr;
    HandleByUuidFn handle_by_uuid = nullptr;
    ProcessesFn compute = nullptr;
    ProcessesFn graphics = nullptr;
  };
  explicit Nvml(Functions f) : f_(f) {}
  // The library stays loaded (NVML's own threads may outlive a dlclose).
  ~Nvml() override { f_.shutdown(); }

  absl::StatusOr<std::vector<GpuProcess>> Processes(const std::string& uuid) override {
    NvmlDevice device = nullptr;
    if (NvmlReturn r = f_.handle_by_uuid(uuid.c_str(), &device); r != kNvmlSuccess) {
      return Error("nvmlDeviceGetHandleByUUID", uuid, r);
    }
    std::map<int64_t, GpuProcess> by_pid;
    for (const auto& [fn, name, graphics] :
         {std::tuple{f_.compute, "nvmlDeviceGetComputeRunningProcesses_v3", false},
          std::tuple{f_.graphics, "nvmlDeviceGetGraphicsRunningProcesses_v3", true}}) {
      std::vector<NvmlProcessInfo> infos(64);
      unsigned int count = static_cast<unsigned int>(infos.size());
      NvmlReturn r = fn(device, &count, infos.data());
      // Processes may start between the calls: grow a few times.
      for (int tries = 0; r == kNvmlInsufficientSize && tries < 4; ++tries) {
        infos.resize(static_cast<size_t>(count) + 16);
        count = static_cast<unsigned int>(infos.size());
        r = fn(device, &count, infos.data());
      }
      if (r != kNvmlSuccess) return Error(name, uuid, r);
      for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
        GpuProcess p;
        p.pid = infos[i].pid;
        p.used_bytes = infos[i].used_gpu_memory == kNvmlValueNotAvailable
                           ? -1
                           : static_cast<int64_t>(infos[i].used_gpu_memory);
        p.graphics = graphics;
        by_pid.emplace(p.pid, p);  // a process in both lists: its compute entry
      }
    }
    std::vector<GpuProcess> out;
    for (auto& [pid, p] : by_pid) out.push_back(p);
    return out;
  }

 private:
  absl::Status Error(const char* call, const std::string& uuid, NvmlReturn r) {
    const char* text = f_.error_string ? f_.error_string(r) : nullptr;
    return absl::UnavailableError(
        absl::StrCat("NVML ", call, " for ", uuid, ": ", text ? text : "error", " (", r, ")"));
  }
  const Functions f_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuProcessSource>> LoadNvml(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "NVML cannot be loaded: ", why ? why : library,
        " (the NVIDIA driver's library; in a container, NVIDIA_DRIVER_CAPABILITIES must "
        "include utility)"));
  }
  Nvml::Functions f;
  std::string missing;
  auto sym = [&](auto* out, const char* name) {
    *out = reinterpret_cast<std::remove_pointer_t<decltype(out)>>(dlsym(lib, name));
    if (*out == nullptr && missing.empty()) missing = name;
  };
  sym(&f.init, "nvmlInit_v2");
  sym(&f.shutdown, "nvmlShutdown");
  sym(&f.error_string, "nvmlErrorString");
  sym(&f.handle_by_uuid, "nvmlDeviceGetHandleByUUID");
  sym(&f.compute, "nvmlDeviceGetComputeRunningProcesses_v3");
  sym(&f.graphics, "nvmlDeviceGetGraphicsRunningProcesses_v3");
  if (!missing.empty()) {
    dlclose(lib);
    return absl::FailedPreconditionError(
        absl::StrCat("NVML from ", library, " lacks ", missing, " (a driver older than R470?)"));
  }
  if (NvmlReturn r = f.init(); r != kNvmlSuccess) {
    const char* text = f.error_string(r);
    dlclose(lib);
    return absl::FailedPreconditionError(
        absl::StrCat("nvmlInit_v2 failed: ", text ? text : "error", " (", r, ")"));
  }
  return std::unique_ptr<GpuProcessSource>(std::make_unique<Nvml>(f));
}

std::string ProcessName(int64_t pid, const std::string& proc) {
  std::ifstream in(absl::StrCat(proc, "/", pid, "/comm"));
  std::string name;
  if (pid <= 0 || !in || !std::getline(in, name) || name.empty()) {
    return "not visible from this container";
  }
  return name;
}

}  // namespace benchd::server
