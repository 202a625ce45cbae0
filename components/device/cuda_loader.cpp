// Finds and loads libtrainyard_cuda.so (components/device/cuda_module.h), and asks the CUDA driver
// whether it has a device without loading LibTorch's CUDA side.
#include <dlfcn.h>

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

bool cuda_driver_has_devices() {
  static const bool has = [] {
    // The driver's own library, as every CUDA program finds it; absent on a machine without one.
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) return false;
    using Init = int (*)(unsigned);
    using Count = int (*)(int*);
    auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
    auto count = reinterpret_cast<Count>(dlsym(driver, "cuDeviceGetCount"));
    int devices = 0;
    return init && count && init(0) == 0 && count(&devices) == 0 && devices > 0;
  }();
  return has;
}

bool wants_cuda(const std::string& accelerator) {
  return accelerator == "cuda" || (accelerator == "auto" && cuda_driver_has_devices());
}

void load_cuda_if_wanted(const std::string& accelerator) {
  if (wants_cuda(accelerator)) cuda_module();
}

}  // namespace trainyard
