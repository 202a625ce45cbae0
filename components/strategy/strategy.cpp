// What every strategy shares (the optimizer step, gradient clipping, memory accounting), the
// `single` strategy, and the registry entries of all strategies.
#include <torch/nn/utils/clip_grad.h>

#include "components/optim/fused_adam.h"
#include "components/optim/optimizers.h"
#include "components/strategy/strategy.h"

namespace trainyard {

namespace {

std::vector<torch::Tensor> optimizer_tensors(const torch::optim::Optimizer& optimizer) {
  std::vector<torch::Tensor> tensors;
  for (const auto& group : optimizer.param_groups())
    tensors.insert(tensors.end(), group.params().begin(), group.params().end());
  return tensors;
}

class SingleDevice : public Strategy {
 public:
  void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) override {
    model.to(device, param_dtype);
  }
  void backward(const torch::Tensor& loss, bool sync) override { loss.backward(); }
};

struct NoOptions {};

}  // namespace

double Strategy::clip_grad_norm(torch::optim::Optimizer& optimizer, double max_norm) {
  return torch::nn::utils::clip_grad_norm_(optimizer_tensors(optimizer), max_norm);
}

void Strategy::step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) {
  step_unless_overflowed(optimizer, found_inf);
}

TrainingStateBytes Strategy::state_bytes(Model& model, const torch::optim::Optimizer& optimizer) const {
  const double parameters = tensor_bytes(model.parameters());
  return {parameters, parameters, optimizer_state_bytes(optimizer)};  // a gradient per parameter
}

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
  register_ddp(registry);
  register_zero2(registry);
  register_fsdp(registry);
}

}  // namespace trainyard
