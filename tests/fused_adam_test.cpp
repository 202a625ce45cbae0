// The fused Adam/AdamW step matches LibTorch's reference optimizers, and a step skipped for an fp16
// overflow leaves no trace.
#include <gtest/gtest.h>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include "components/optim/fused_adam.h"

namespace trainyard {
namespace {

// Runs `steps` steps of `optimizer` on `w` with fixed pseudo-random gradients.
void run(torch::optim::Optimizer& optimizer, torch::Tensor& w, int steps,
         double lr_change_at = -1) {
  torch::Generator generator = at::detail::createCPUGenerator(3);
  for (int i = 0; i < steps; ++i) {
    if (i == lr_change_at)
      for (auto& group : optimizer.param_groups()) group.options().set_lr(1e-3);
    w.mutable_grad() = torch::randn(w.sizes(), generator);
    optimizer.step();
  }
}

TEST(FusedAdamTest, AdamWMatchesTheReference) {
  auto options = torch::optim::AdamWOptions(1e-2).betas({0.9, 0.99}).eps(1e-8).weight_decay(0.05);
  torch::Tensor a = torch::linspace(-1, 1, 12).requires_grad_(),
                b = a.detach().clone().requires_grad_();
  torch::optim::AdamW reference({a}, options);
  FusedAdam fused({b}, options, /*decoupled_weight_decay=*/true);
  run(reference, a, 6, 3);
  run(fused, b, 6, 3);
  EXPECT_TRUE(torch::allclose(a, b, 1e-6, 1e-7)) << (a - b).abs().max().item<float>();
}

TEST(FusedAdamTest, AdamWithL2MatchesTheReference) {
  torch::Tensor a = torch::linspace(-1, 1, 12).requires_grad_(),
                b = a.detach().clone().requires_grad_();
  torch::optim::Adam reference({a}, torch::optim::AdamOptions(1e-2).weight_decay(0.1));
  FusedAdam fused({b}, torch::optim::AdamWOptions(1e-2).weight_decay(0.1),
                  /*decoupled_weight_decay=*/false);
  run(reference, a, 5);
  run(fused, b, 5);
  EXPECT_TRUE(torch::allclose(a, b, 1e-6, 1e-7)) << (a - b).abs().max().item<float>();
}

TEST(FusedAdamTest, AnOverflowSkippedStepLeavesNoTrace) {
  auto options = torch::optim::AdamWOptions(1e-2);
  torch::Tensor a = torch::ones({4}).requires_grad_(), b = torch::ones({4}).requires_grad_();
  FusedAdam plain({a}, options, true), skipping({b}, options, true);
  a.mutable_grad() = torch::full({4}, 0.5);
  b.mutable_grad() = torch::full({4}, 0.5);
  plain.step();
  skipping.step_unless(torch::zeros({1}));  // a clean step
  b.mutable_grad() = torch::full({4}, 1e6);
  skipping.step_unless(torch::ones({1}));  // overflow: nothing changes
  EXPECT_TRUE(torch::equal(a, b));
  a.mutable_grad() = torch::full({4}, 0.25);
  b.mutable_grad() = torch::full({4}, 0.25);
  plain.step();
  skipping.step_unless(torch::zeros({1}));
  EXPECT_TRUE(torch::allclose(a, b, 0, 0))
      << "the skipped step must not count in the bias correction";
}

}  // namespace
}  // namespace trainyard
