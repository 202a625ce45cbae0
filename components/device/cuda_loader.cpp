// Finds and loads libtrainyard_cuda.so (components/device/cuda_module.h), and asks the CUDA driver
// whether it has a device without loading LibTorch's CUDA side.
#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "common/process.h"
#include "components/device/cuda_module.h"

// Defined when the module's code is linked into this binary (the tests); null otherwise.
extern "C" const trainyard::CudaModule* trainyard_cuda_module() __attribute__((weak));

namespace trainyard {

namespace {

constexpr const char* kModuleFile = "libtrainyard_cuda.so";

const CudaModule* load_module(std::string& why) {
  if (trainyard_cuda_module) return trainyard_cuda_module();
  std::string path;
  try {
    path = (std::filesystem::path(self_executable()).parent_path() / kModuleFile).string();
  } catch (const std::exception& e) {
    why = e.what();
    return nullptr;
  }
  // Global: libtorch_cuda's kernels and hooks register into the libtorch_cpu already loaded.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    why = fmt::format("{} could not be loaded: {}", path, dlerror());
    return nullptr;
  }
  using Entry = const CudaModule* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "trainyard_cuda_module"));
  if (!entry) {
    why = fmt::format("{} has no trainyard_cuda_module: not this trainyard's module", path);
    return nullptr;
  }
  const CudaModule* module = entry();
  if (module->version() != CudaModule::kVersion) {
    why = fmt::format("{} is version {}, this trainyard-engine needs {}: rebuild them together",
                      path, module->version(), CudaModule::kVersion);
    return nullptr;
  }
  return module;
}

}  // namespace

const CudaModule* cuda_module(std::string* why) {
  static std::once_flag once;
  static const CudaModule* module = nullptr;
  static std::string error;
  std::call_once(once, [] { module = load_module(error); });
  if (!module && why) *why = error;
  return module;
}

namespace {

// What the driver says of its devices: how many, and the smallest one's memory (0 without any).
struct DriverDevices {
  int count = 0;
  double smallest_bytes = 0;
};

const DriverDevices& driver_devices() {
  static const DriverDevices devices = [] {
    DriverDevices found;
    // The driver's own library, as every CUDA program finds it; absent on a machine without one.
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) return found;
    // CUresult is an int (0: success), CUdevice an int.
    using Init = int (*)(unsigned);
    using Count = int (*)(int*);
    using Get = int (*)(int*, int);
    using TotalMem = int (*)(size_t*, int);
    auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
    auto count = reinterpret_cast<Count>(dlsym(driver, "cuDeviceGetCount"));
    auto get = reinterpret_cast<Get>(dlsym(driver, "cuDeviceGet"));
    auto total_mem = reinterpret_cast<TotalMem>(dlsym(driver, "cuDeviceTotalMem_v2"));
    int devices = 0;
    if (!init || !count || init(0) != 0 || count(&devices) != 0 || devices <= 0) return found;
    found.count = devices;
    for (int ordinal = 0; get && total_mem && ordinal < devices; ++ordinal) {
      int device = 0;
      size_t bytes = 0;
      if (get(&device, ordinal) != 0 || total_mem(&bytes, device) != 0) {
        found.smallest_bytes = 0;  // one unanswered: no figure rather than a wrong one
        break;
      }
      const auto b = static_cast<double>(bytes);
      found.smallest_bytes = ordinal == 0 ? b : std::min(found.smallest_bytes, b);
    }
    return found;
  }();
  return devices;
}

}  // namespace

bool cuda_driver_has_devices() { return driver_devices().count > 0; }

std::optional<double> cuda_device_memory_bytes() {
  const DriverDevices& devices = driver_devices();
  if (devices.count == 0 || devices.smallest_bytes <= 0) return std::nullopt;
  return devices.smallest_bytes;
}

bool wants_cuda(const std::string& accelerator) {
  return accelerator == "cuda" || (accelerator == "auto" && cuda_driver_has_devices());
}

void load_cuda_if_wanted(const std::string& accelerator) {
  if (wants_cuda(accelerator)) cuda_module();
}

}  // namespace trainyard
