// The feed's stream on a real GPU: the next batch's copy and transform run while the step queued
// before them still runs, without the host waiting, and a batch's memory is not handed to the next
// batch while the compute stream still reads it. A kernel that spins on the compute stream stands
// for the training step (or a CUDA graph's replay). Each test skips without a CUDA device.
#include <chrono>
#include <thread>

#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "components/data/image_batch.h"
#include "runner/engine/device_feed.h"
#include "runner/engine/sync_debug.h"

namespace trainyard {
namespace {

// About two seconds of spinning at the H200's clock: far longer than one batch's copy and
// transform, far shorter than the test's patience.
constexpr int64_t kStepCycles = 4'000'000'000;

Batch batch_of(torch::Tensor inputs, torch::Tensor targets) {
  Batch batch;
  batch.inputs = std::move(inputs);
  batch.targets = std::move(targets);
  return batch;
}

// Waits until `stream` has done its work or `other` has; true if `stream` finished first.
bool finishes_before(const c10::cuda::CUDAStream& stream, const c10::cuda::CUDAStream& other) {
  while (!stream.query()) {
    if (other.query()) return stream.query();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class DeviceFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
  const torch::Device device_{torch::kCUDA, 0};
};

TEST_F(DeviceFeedTest, TheNextBatchIsReadyWhileTheStepBeforeItStillRuns) {
  DeviceFeed feed(device_);
  ASSERT_TRUE(feed.stream().has_value());
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
  ASSERT_NE(*feed.stream(), compute);

  const Batch loaded = batch_of(torch::randint(0, 256, {64, 3, 32, 32}, torch::kUInt8).pin_memory(),
                                torch::randint(0, 10, {64}, torch::kLong).pin_memory());
  const BatchTransform transform =
      image_transform({.size = 48, .normalize = "imagenet", .augment = "crop-flip"}, true);
  constexpr uint64_t kSeed = 7;
  auto prepare = [&] { return transform(loaded.to(device_, /*non_blocking=*/true), kSeed); };
  feed.next(prepare);  // the kernels loaded and the pinned staging allocated once, untimed
  torch::cuda::synchronize(device_.index());

  Batch batch;
  {
    SyncDebugGuard no_host_waits(c10::cuda::SyncDebugMode::L_ERROR);
    at::cuda::sleep(kStepCycles);  // the step before the batch, on the compute stream
    batch = feed.next(prepare);
  }
  EXPECT_TRUE(finishes_before(*feed.stream(), compute))
      << "the batch's copy and transform waited for the step queued before them";
  EXPECT_FALSE(compute.query()) << "the step ended before the batch was ready: spin longer";
  torch::cuda::synchronize(device_.index());

  // The same batch as the CPU transform makes it (bilinear resizing differs in the last bits).
  const Batch reference = transform(loaded, kSeed);
  EXPECT_TRUE(torch::allclose(batch.inputs.cpu(), reference.inputs, 1e-5, 1e-5));
  EXPECT_TRUE(torch::equal(batch.targets.cpu(), reference.targets));
}

TEST_F(DeviceFeedTest, ABatchIsNotOverwrittenByTheNextWhileTheStepStillReadsIt) {
  DeviceFeed feed(device_);
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
  auto filled = [&](float value) {
    const Batch host = batch_of(torch::full({1 << 20}, value).pin_memory(),
                                torch::zeros({1}, torch::kLong).pin_memory());
    return [this, host] { return host.to(device_, /*non_blocking=*/true); };
  };

  // The premise: on one stream the caching allocator hands a freed block to the next allocation of
  // its size at once, so without the compute stream's mark the second batch would land in the
  // first one's memory while the step still reads it.
  {
    c10::cuda::CUDAStreamGuard on_feed_stream(*feed.stream());
    const void* freed = torch::empty({1 << 20}, torch::TensorOptions(device_)).data_ptr();
    EXPECT_EQ(torch::empty({1 << 20}, torch::TensorOptions(device_)).data_ptr(), freed);
  }

  // Everything allocated before the spin: a cudaMalloc or cudaHostAlloc while it runs may wait
  // for it.
  const auto first_batch = filled(1), second_batch = filled(2);
  torch::Tensor seen;
  const void* first_memory = nullptr;
  {
    const Batch first = feed.next(first_batch);
    first_memory = first.inputs.data_ptr();
    seen = torch::empty_like(first.inputs);
    at::cuda::sleep(kStepCycles);  // the step, still running when the batch is freed
    seen.copy_(first.inputs);      // what the step reads of it, after the spin
  }
  const Batch second = feed.next(second_batch);
  EXPECT_NE(second.inputs.data_ptr(), first_memory);
  EXPECT_FALSE(compute.query()) << "the step ended before the second batch: spin longer";
  torch::cuda::synchronize(device_.index());
  EXPECT_TRUE(seen.eq(1).all().item<bool>()) << "the step read the next batch's values";
  EXPECT_TRUE(second.inputs.eq(2).all().item<bool>());
}

TEST(DeviceFeedCpuTest, OnTheCpuTheBatchIsPreparedWhereItStands) {
  DeviceFeed feed(torch::kCPU);
  EXPECT_FALSE(feed.stream().has_value());
  const Batch batch = feed.next([] {
    return batch_of(torch::ones({2, 3}), torch::zeros({2}, torch::kLong));
  });
  EXPECT_TRUE(torch::equal(batch.inputs, torch::ones({2, 3})));
}

}  // namespace
}  // namespace trainyard
