// The `single` strategy: one process, one device, nothing shared.
#include <torch/nn/utils/clip_grad.h>

#include "components/optim/fused_adam.h"
#include "components/strategy/strategy.h"

namespace trainyard {

namespace {

class SingleDevice : public Strategy {
 public:
  void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) override {
    model.to(device, param_dtype);
  }
  void backward(const torch::Tensor& loss) override { loss.backward(); }
  double clip_grad_norm(Model& model, double max_norm) override {
    return torch::nn::utils::clip_grad_norm_(model.parameters(), max_norm);
  }
  void step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) override {
    step_unless_overflowed(optimizer, found_inf);
  }
};

struct NoOptions {};

}  // namespace

void step_unless_overflowed(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) {
  if (!found_inf.defined()) optimizer.step();
  else if (auto* fused = dynamic_cast<FusedAdam*>(&optimizer)) fused->step_unless(found_inf);
  else if (found_inf.item<float>() == 0.0f) optimizer.step();
  optimizer.zero_grad(/*set_to_none=*/true);
}

void register_strategies(Registry& registry) {
  registry.add<StrategyPtr(const StrategyContext&)>(
      ComponentKind::strategy, "single", "one process on one device", OptionSet<NoOptions>(),
      [](const NoOptions&, const StrategyContext&) -> StrategyPtr { return std::make_shared<SingleDevice>(); });
  const char* reason = "planned: sharded parameters, gradients and optimizer state";
  register_ddp(registry);
  registry.plan(ComponentKind::strategy, "fsdp", reason);
  registry.plan(ComponentKind::strategy, "zero2", reason);
}

}  // namespace trainyard
