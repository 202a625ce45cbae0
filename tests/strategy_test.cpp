// What every strategy shares, on one process: gradient clipping agrees with
// torch::nn::utils::clip_grad_norm_ and returns its norm as a tensor (nothing read on the host).
#include <gtest/gtest.h>

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/sgd.h>

#include "components/builtin.h"
#include "components/strategy/strategy.h"
#include "trainyard/model.h"

namespace trainyard {
namespace {

StrategyPtr single_strategy() {
  return build_strategy(builtin_registry(), ComponentChoice{.name = "single"}, StrategyContext{});
}

// Parameters of three shapes with seeded gradients of `scale`; the last has no gradient.
std::vector<torch::Tensor> parameters_with_gradients(double scale, torch::ScalarType dtype) {
  torch::manual_seed(7);
  std::vector<torch::Tensor> parameters;
  for (auto shape : {std::vector<int64_t>{4, 3}, {5}, {2, 2, 2}, {3}}) {
    auto p = torch::zeros(shape, torch::TensorOptions().dtype(dtype).requires_grad(true));
    parameters.push_back(p);
  }
  for (size_t i = 0; i + 1 < parameters.size(); ++i)
    parameters[i].mutable_grad() = (torch::randn(parameters[i].sizes()) * scale).to(dtype);
  return parameters;
}

// What the progress line shows without clipping: the same norm clipping would report, and the
// gradients left as they were.
TEST(GradientClippingTest, TheGradientNormIsTheNormClippingReportsAndChangesNothing) {
  auto measured = parameters_with_gradients(10.0, torch::kFloat);
  auto clipped = parameters_with_gradients(10.0, torch::kFloat);
  torch::optim::SGD measured_optimizer(measured, torch::optim::SGDOptions(0.1));
  torch::optim::SGD clipped_optimizer(clipped, torch::optim::SGDOptions(0.1));
  const torch::Tensor norm = single_strategy()->gradient_norm(measured_optimizer);
  EXPECT_EQ(norm.dim(), 0);
  EXPECT_EQ(norm.item<double>(),
            single_strategy()->clip_grad_norm(clipped_optimizer, 1.0).item<double>());
  const auto untouched = parameters_with_gradients(10.0, torch::kFloat);
  for (size_t i = 0; i + 1 < measured.size(); ++i)
    EXPECT_TRUE(torch::equal(measured[i].grad(), untouched[i].grad()));
}

TEST(GradientClippingTest, MatchesTorchClipGradNormAboveAndBelowTheLimit) {
  for (double scale :
       {10.0, 0.01}) {  // a norm above max_norm (scaled down) and below it (unchanged)
    auto ours = parameters_with_gradients(scale, torch::kFloat);
    auto reference = parameters_with_gradients(scale, torch::kFloat);
    torch::optim::SGD optimizer(ours, torch::optim::SGDOptions(0.1));

    torch::Tensor norm = single_strategy()->clip_grad_norm(optimizer, 1.0);
    const double expected = torch::nn::utils::clip_grad_norm_(reference, 1.0);

    EXPECT_EQ(norm.dim(), 0);
    EXPECT_NEAR(norm.item<double>(), expected, 1e-5 * expected);
    for (size_t i = 0; i + 1 < ours.size(); ++i)
      EXPECT_TRUE(torch::allclose(ours[i].grad(), reference[i].grad(), 1e-6, 1e-7))
          << "parameter " << i;
    EXPECT_FALSE(ours.back().grad().defined());
  }
}

// bf16 and fp16 gradients (bf16-true, 16-true): the norm is summed in float, so an fp16 norm past
// 65504 is not infinite, and the scaled gradients keep their dtype.
TEST(GradientClippingTest, HalfPrecisionGradientsAreMeasuredInFloat) {
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    auto parameters = parameters_with_gradients(1.0, dtype);
    for (size_t i = 0; i + 1 < parameters.size(); ++i)
      parameters[i].mutable_grad().fill_(30000);  // squares overflow fp16
    torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.1));

    torch::Tensor norm = single_strategy()->clip_grad_norm(optimizer, 1.0);

    EXPECT_EQ(norm.scalar_type(), torch::kFloat);
    const double elements = 12 + 5 + 8;
    EXPECT_NEAR(norm.item<double>(), 30000 * std::sqrt(elements),
                1e-2 * 30000 * std::sqrt(elements));
    auto clipped = torch::cat({parameters[0].grad().flatten(), parameters[1].grad().flatten(),
                               parameters[2].grad().flatten()});
    EXPECT_EQ(clipped.scalar_type(), dtype);
    EXPECT_NEAR(clipped.to(torch::kFloat).norm().item<double>(), 1.0, 1e-2);
  }
}

TEST(GradientClippingTest, NoGradientsGiveANormOfZero) {
  auto p = torch::zeros({3}, torch::requires_grad());
  torch::optim::SGD optimizer({p}, torch::optim::SGDOptions(0.1));
  EXPECT_EQ(single_strategy()->clip_grad_norm(optimizer, 1.0).item<double>(), 0.0);
}

// A model of LibTorch's own modules (as a plugin's may be): under a half precision its
// floating-point tensors take the dtype and BatchNorm's num_batches_tracked stays int64, as
// PyTorch's Module.to(dtype) leaves it (LibTorch's C++ Module::to(dtype) would convert it).
struct BatchNormNet : Model {
  BatchNormNet() {
    linear = register_module("linear", torch::nn::Linear(4, 3));
    norm = register_module("norm", torch::nn::BatchNorm1d(3));
  }
  torch::Tensor forward(const Batch& batch) override {
    return norm->forward(linear->forward(batch.inputs));
  }
  torch::nn::Linear linear{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
};

TEST(PlaceModelTest, FloatingPointTensorsTakeTheDtypeAndIntegerBuffersKeepTheirs) {
  BatchNormNet net;
  single_strategy()->setup(net, torch::kCPU, torch::kBFloat16);
  for (const auto& p : net.parameters()) EXPECT_EQ(p.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(net.norm->running_mean.scalar_type(), torch::kBFloat16);
  ASSERT_EQ(net.norm->num_batches_tracked.scalar_type(), torch::kLong);
  net.norm->num_batches_tracked.fill_(300);
  torch::NoGradGuard no_grad;
  net.forward({torch::randn({8, 4}).to(torch::kBFloat16), torch::zeros({8}, torch::kLong), {}});
  EXPECT_EQ(net.norm->num_batches_tracked.item<int64_t>(), 301);
}

}  // namespace
}  // namespace trainyard
