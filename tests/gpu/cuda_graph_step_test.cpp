// runtime.compile: cuda-graphs on a real GPU, on a small step of its own (a stack of matmuls whose
// activations dwarf its weights): replays compute what eager steps compute on the same batches,
// capture does not hold a second copy of the warm-up steps' cached activations, and a capture that
// fails ends with the cause and the fix. Each test skips without a CUDA device.
#include <cstdlib>
#include <iostream>

#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "runner/engine/cuda_graph_step.h"

namespace trainyard {
namespace {

constexpr int kWarmup = 3;

// Weights of a few [width, width] layers and one plain SGD step over them: forward, gradients,
// update, with nothing read back to the host. The learning rate is small enough for the loss to
// fall: with a diverging one the last bits of any difference would grow tenfold a step.
struct TinyNet {
  TinyNet(const torch::Device& device, int64_t width, int layers) {
    torch::manual_seed(0);
    for (int i = 0; i < layers; ++i)
      weights.push_back((torch::randn({width, width}, torch::TensorOptions(device)) / width)
                            .set_requires_grad(true));
  }
  void step(const Batch& batch, torch::Tensor& logits, torch::Tensor& loss) {
    torch::Tensor h = batch.inputs;
    for (const auto& w : weights) h = torch::relu(h.matmul(w)) + h;
    logits = h;
    loss = (h.sum(1) - batch.targets.to(torch::kFloat)).square().mean();
    const auto grads = torch::autograd::grad({loss}, weights);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < weights.size(); ++i) weights[i].sub_(grads[i], /*alpha=*/1e-4);
  }
  CudaGraphStep::StepFn step_fn() {
    return [this](const Batch& b, torch::Tensor& logits, torch::Tensor& loss) {
      step(b, logits, loss);
    };
  }
  std::vector<torch::Tensor> weights;
};

Batch random_batch(const torch::Device& device, int64_t rows, int64_t width, int seed) {
  torch::manual_seed(100 + seed);
  Batch batch;
  batch.inputs = torch::randn({rows, width}, torch::TensorOptions(device));
  batch.targets = torch::randint(0, 10, {rows}, torch::TensorOptions(device).dtype(torch::kLong));
  return batch;
}

int64_t peak_reserved(const torch::Device& device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

class CudaGraphStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    torch::cuda::synchronize(device_.index());
    c10::cuda::CUDACachingAllocator::emptyCache();  // nothing cached by the tests before
  }
  const torch::Device device_{torch::kCUDA, 0};
  CudaGraphStep::LogFn log_ = [](const std::string& line) { std::cout << line << "\n"; };
};

TEST_F(CudaGraphStepTest, ReplaysComputeWhatEagerStepsComputeOnTheSameBatches) {
  TinyNet eager(device_, 256, 4), graphed(device_, 256, 4);
  CudaGraphStep graph(device_, graphed.step_fn(), log_, kWarmup);
  for (int i = 0; i < kWarmup + 4; ++i) {
    const Batch batch = random_batch(device_, 512, 256, i);
    torch::Tensor logits, loss, graph_logits, graph_loss;
    eager.step(batch, logits, loss);
    graph.run(batch, graph_logits, graph_loss);
    EXPECT_TRUE(torch::allclose(graph_loss, loss, 1e-5, 1e-6)) << "step " << i;
  }
  EXPECT_TRUE(graph.captured());
  EXPECT_EQ(graph.summary(kWarmup + 4), "captured; 4 of 7 steps replayed");
  for (size_t i = 0; i < eager.weights.size(); ++i)
    EXPECT_TRUE(torch::allclose(graphed.weights[i], eager.weights[i], 1e-5, 1e-6))
        << "weight " << i;
}

// As a step in micro-batches runs (train.micro_batch_size): several backward passes accumulate
// into .grad inside one capture — the first creates the gradients in the graph's pool, the others
// add to them — then one update, and the gradients are set to none as zero_grad does.
struct MicroBatchedNet : TinyNet {
  using TinyNet::TinyNet;
  void step(const Batch& batch, int64_t micro, torch::Tensor& logits, torch::Tensor& loss) {
    const int64_t n = batch.inputs.size(0);
    std::vector<torch::Tensor> parts;
    torch::Tensor loss_sum;
    for (int64_t start = 0; start < n; start += micro) {
      torch::Tensor h = batch.inputs.narrow(0, start, micro);
      for (const auto& w : weights) h = torch::relu(h.matmul(w)) + h;
      const torch::Tensor part_loss =
          (h.sum(1) - batch.targets.narrow(0, start, micro).to(torch::kFloat)).square().mean();
      (part_loss * (static_cast<double>(micro) / n)).backward();
      parts.push_back(h.detach());
      loss_sum =
          loss_sum.defined() ? loss_sum + part_loss.detach() * micro : part_loss.detach() * micro;
    }
    logits = torch::cat(parts);
    loss = loss_sum / static_cast<double>(n);
    torch::NoGradGuard no_grad;
    for (auto& w : weights) {
      w.sub_(w.grad(), /*alpha=*/1e-4);
      w.mutable_grad().reset();
    }
  }
};

TEST_F(CudaGraphStepTest, MicroBatchesAccumulateGradientsInsideOneCapture) {
  MicroBatchedNet eager(device_, 256, 4), graphed(device_, 256, 4);
  CudaGraphStep graph(
      device_,
      [&](const Batch& b, torch::Tensor& logits, torch::Tensor& loss) {
        graphed.step(b, 128, logits, loss);
      },
      log_, kWarmup);
  for (int i = 0; i < kWarmup + 4; ++i) {
    const Batch batch = random_batch(device_, 512, 256, i);
    torch::Tensor logits, loss, graph_logits, graph_loss;
    eager.step(batch, 128, logits, loss);
    graph.run(batch, graph_logits, graph_loss);
    EXPECT_TRUE(torch::allclose(graph_loss, loss, 1e-5, 1e-6)) << "step " << i;
    EXPECT_TRUE(torch::allclose(graph_logits, logits, 1e-5, 1e-6)) << "step " << i;
  }
  EXPECT_TRUE(graph.captured());
  for (size_t i = 0; i < eager.weights.size(); ++i)
    EXPECT_TRUE(torch::allclose(graphed.weights[i], eager.weights[i], 1e-5, 1e-6))
        << "weight " << i;
}

TEST_F(CudaGraphStepTest, CaptureDoesNotKeepASecondCopyOfTheWarmUpActivations) {
  // 8 layers over [8192, 512] floats: about 16 MiB an activation, 1 MiB a weight.
  TinyNet net(device_, 512, 8);
  CudaGraphStep graph(device_, net.step_fn(), log_, kWarmup);
  const Batch batch = random_batch(device_, 8192, 512, 0);
  torch::Tensor logits, loss;
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
  for (int i = 0; i < kWarmup; ++i) graph.run(batch, logits, loss);
  torch::cuda::synchronize(device_.index());
  const int64_t eager_peak = peak_reserved(device_);
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
  graph.run(batch, logits, loss);  // capture, then the first replay
  graph.run(batch, logits, loss);
  torch::cuda::synchronize(device_.index());
  ASSERT_TRUE(graph.captured());
  const int64_t graph_peak = peak_reserved(device_);
  // With the warm-up's cached blocks kept, capture's private pool would come on top of them:
  // about twice the eager peak.
  EXPECT_LT(graph_peak, eager_peak * 5 / 4)
      << "eager steps reserved at most " << eager_peak << " bytes, capture " << graph_peak;
}

// In a process of its own: trains a step that reads the loss back to the host — which cannot be
// captured — until capture; exits 3 with the error it ends with, 0 if nothing failed.
[[noreturn]] void capture_a_step_that_reads_the_loss(const torch::Device& device) {
  TinyNet net(device, 64, 2);
  auto step = [&](const Batch& batch, torch::Tensor& logits, torch::Tensor& loss) {
    net.step(batch, logits, loss);
    if (loss.item<float>() < 0) std::cerr << "a negative squared error\n";
  };
  CudaGraphStep graph(
      device, step, [](const std::string&) {}, kWarmup);
  const Batch batch = random_batch(device, 32, 64, 0);
  torch::Tensor logits, loss;
  try {
    for (int i = 0; i <= kWarmup; ++i) graph.run(batch, logits, loss);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    std::_Exit(3);  // the process cannot go on: no destructors either
  }
  std::_Exit(0);
}

TEST_F(CudaGraphStepTest, AFailedCaptureEndsTheProcessWithTheCauseAndTheFix) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: CUDA does not survive fork
  EXPECT_EXIT(capture_a_step_that_reads_the_loss(device_), ::testing::ExitedWithCode(3),
              "could not be captured.*set runtime.compile: none");
}

}  // namespace
}  // namespace trainyard
