#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include "common/process.h"
#include "components/device/cuda_module.h"
#include "runner/engine/engine.h"

namespace trainyard {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "CPU";
}

}  // namespace

DeviceInfo resolve_device(const RuntimeOptions& runtime) {
  // CUDA is asked of LibTorch only once its CUDA module is loaded (cuda_module.h); a CPU run, and
  // `auto` on a machine without a driver, never load it.
  std::string not_loaded;
  const bool cuda = wants_cuda(option_word(runtime.accelerator)) && cuda_module(&not_loaded) &&
                    torch::cuda::is_available();
  DeviceInfo info;
  const bool automatic = runtime.accelerator == Accelerator::automatic;
  info.type = automatic ? (cuda ? "cuda" : "cpu") : option_word(runtime.accelerator);
  // `auto` on a machine whose driver has a device, but without LibTorch's CUDA side: said, not
  // trained on the CPU without a word.
  if (automatic && !not_loaded.empty()) {
    info.type = "cuda";
    info.name = "CUDA";
    info.unavailable_reason =
        "accelerator auto: this machine's CUDA driver has a device, but LibTorch's CUDA side did "
        "not load: " +
        not_loaded + " (set runtime.accelerator: cpu to train on the CPU)";
    return info;
  }
  if (info.type == "cuda") {
    if (!cuda) {
      info.name = "CUDA";
      info.unavailable_reason = not_loaded.empty()
                                    ? "needs a CUDA device; this machine has none"
                                    : "needs a CUDA device; LibTorch's CUDA side: " + not_loaded;
      return info;
    }
    const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
    info.cuda_devices = count;
    if (runtime.devices > count)
      info.unavailable_reason =
          fmt::format("needs {} CUDA devices; this machine has {}", runtime.devices, count);
    info.name = cuda_module()->device_name(0);
    info.memory_bytes = cuda_device_memory_bytes().value_or(0);
    return info;
  }
  if (runtime.compile == Compile::cuda_graphs)
    info.unavailable_reason =
        "runtime.compile: cuda-graphs needs a CUDA device; this machine has none";
  // Not the threads: the controller resolves the device too, and the threads are the worker's
  // (the run's `threads` attribute).
  info.name = cpu_model_name();
  return info;
}

int intra_op_threads(const RuntimeOptions& runtime, std::string& why) {
  if (runtime.threads.count > 0) {
    why = "runtime.threads";
    return static_cast<int>(runtime.threads.count);
  }
  // Chosen once for every rank by the launcher (launch_run), or recorded by the run it continues.
  if (const char* chosen = std::getenv(kThreadsVariable)) {
    const char* chosen_why = std::getenv(kThreadsWhyVariable);
    why = chosen_why ? chosen_why : "runtime.threads 0";
    return std::max(1, std::atoi(chosen));
  }
  const int ranks = [] {  // the engine without a launcher: 1
    const char* local = std::getenv("LOCAL_WORLD_SIZE");
    return local ? std::atoi(local) : 1;
  }();
  return runtime.threads.idle ? idle_cpu_threads(ranks, why) : machine_cpu_threads(ranks, why);
}

void reset_process_state() {
  c10::GradMode::set_enabled(true);
  for (const at::DeviceType device : {at::kCPU, at::kCUDA}) {
    at::autocast::set_autocast_enabled(device, false);
    at::autocast::set_autocast_dtype(device,
                                     at::autocast::get_lower_precision_fp_from_device_type(device));
  }
  at::autocast::clear_cache();
  at::autocast::set_autocast_cache_enabled(true);
  at::globalContext().setDeterministicAlgorithms(false, /*warn_only=*/false);
  at::globalContext().setFloat32MatmulPrecision("highest");
}

std::string torch_version() { return TORCH_VERSION; }

double peak_tflops(const std::string& device_name, const std::string& dtype) {
  // The vendor's dense peaks, none measured here (fp32 without tensor cores, as 32-true multiplies
  // with runtime.matmul_precision: highest; TensorFloat32 with high or medium). The H200 SXM's
  // tensor cores are the H100 SXM's: the same dense figures.
  struct Peak {
    const char* device;
    double bf16, tf32, fp32;
  };
  static const Peak peaks[] = {
      {"H200", 989, 495, 67}, {"H100", 989, 495, 67}, {"A100", 312, 156, 19.5}};
  for (const auto& p : peaks) {
    if (device_name.find(p.device) == std::string::npos) continue;
    if (dtype == "BFloat16" || dtype == "Half") return p.bf16;
    if (dtype == "TensorFloat32") return p.tf32;
    if (dtype == "Float") return p.fp32;
  }
  return 0;
}

}  // namespace trainyard
