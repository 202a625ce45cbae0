// The memory the forecast checks a CUDA run against when --device-memory is not given
// (DeviceInfo::memory_bytes, asked of the driver without LibTorch): the smallest visible device's
// total memory, as the CUDA runtime reports it too. Skips without a CUDA device.
#include <algorithm>

#include <ATen/cuda/CUDAContext.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "runner/engine/engine.h"

namespace trainyard {
namespace {

TEST(DeviceMemoryTest, ACudaRunKnowsTheSmallestDevicesMemory) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  double smallest = 0;
  for (int i = 0; i < static_cast<int>(torch::cuda::device_count()); ++i) {
    const auto bytes = static_cast<double>(at::cuda::getDeviceProperties(i)->totalGlobalMem);
    smallest = i == 0 ? bytes : std::min(smallest, bytes);
  }
  const DeviceInfo device = resolve_device({.accelerator = Accelerator::cuda});
  ASSERT_TRUE(device.unavailable_reason.empty()) << device.unavailable_reason;
  EXPECT_EQ(device.memory_bytes, smallest);
}

}  // namespace
}  // namespace trainyard
