// LibTorch's CUDA side is loaded only for a run on CUDA (components/device/cuda_module.h). This
// binary links what trainyard_torch gives the engine — LibTorch's CPU side, no libtorch_cuda — and
// sits beside libtrainyard_cuda.so, so it loads the module the way the engine does. CTest runs
// each test in a process of its own, each starting with nothing of CUDA loaded (run by hand, run
// them one at a time: --gtest_filter).
#include <gtest/gtest.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <fstream>
#include <sstream>
#include <string>

#include "components/device/cuda_module.h"
#include "runner/engine/engine.h"

namespace trainyard {
namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(library) != std::string::npos;
}

bool has_cuda_kernels() {
  const auto add = c10::Dispatcher::singleton().findSchema({"aten::add", "Tensor"});
  return add && add->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
}

TEST(CudaLoadingTest, ACpuRunLoadsNothingOfLibTorchsCudaSide) {
  EXPECT_FALSE(mapped("libtorch_cuda.so"));
  const DeviceInfo cpu = resolve_device({.accelerator = Accelerator::cpu});
  EXPECT_EQ(cpu.type, "cpu");
  EXPECT_TRUE(cpu.unavailable_reason.empty());
  if (!cuda_driver_has_devices()) {
    // `auto` without a driver is the CPU, decided without LibTorch's CUDA side too.
    EXPECT_EQ(resolve_device({.accelerator = Accelerator::automatic}).type, "cpu");
  }
  EXPECT_FALSE(mapped("libtorch_cuda.so"));
  EXPECT_FALSE(mapped("libtrainyard_cuda.so"));
  EXPECT_FALSE(has_cuda_kernels());
}

TEST(CudaLoadingTest, ACudaRunLoadsTheModuleAndWithItLibTorchsCudaKernelsAndHooks) {
  ASSERT_FALSE(mapped("libtorch_cuda.so"));
  const DeviceInfo cuda = resolve_device({.accelerator = Accelerator::cuda});
  EXPECT_EQ(cuda.type, "cuda");
  std::string why;
  ASSERT_NE(cuda_module(&why), nullptr) << why;
  EXPECT_TRUE(mapped("libtrainyard_cuda.so"));
  EXPECT_TRUE(mapped("libtorch_cuda.so"));
  // Registered when the module loaded: CUDA's kernels, and the real CUDA hooks (a process that
  // asked before loading would keep the stub, which cannot say the runtime's version).
  EXPECT_TRUE(has_cuda_kernels());
  EXPECT_GT(at::detail::getCUDAHooks().versionCUDART(), 0);
  if (cuda.unavailable_reason.empty()) {
    EXPECT_FALSE(cuda.name.empty());  // a GPU machine: the device's name, through the module
    // and its memory, through the driver (what the memory forecast checks against by default):
    // between a GiB and a TiB on any GPU a run trains on.
    EXPECT_GE(cuda.memory_bytes, 1024.0 * 1024 * 1024);
    EXPECT_LE(cuda.memory_bytes, 1024.0 * 1024 * 1024 * 1024);
  } else {
    EXPECT_EQ(cuda.unavailable_reason, "needs a CUDA device; this machine has none");
    EXPECT_EQ(cuda.memory_bytes, 0);
  }
  EXPECT_EQ(cuda_device_memory_bytes().has_value(), cuda_driver_has_devices());
}

}  // namespace
}  // namespace trainyard
