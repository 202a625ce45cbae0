// What every strategy shares (the optimizer step, gradient clipping, memory accounting), and the
// `single` strategy.
#include <ATen/ATen.h>

#include "components/strategy/place_model.h"
#include "components/strategy/strategy.h"
#include "trainyard/optimizers.h"

namespace trainyard {

void place_model(torch::nn::Module& model, const torch::Device& device,
                 c10::ScalarType param_dtype) {
  // One copy a tensor, converted on the way (a half-precision model never lands on the device in
  // float32 first).
  torch::NoGradGuard no_grad;
  auto place = [&](torch::Tensor& tensor) {
    tensor.set_data(
        tensor.to(device, tensor.is_floating_point() ? param_dtype : tensor.scalar_type()));
  };
  for (auto& tensor : model.parameters()) place(tensor);
  for (auto& tensor : model.buffers()) place(tensor);
  // A model that keeps tensors of its own beside the registered ones moves them in its to().
  model.to(device);
}

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
    place_model(model, device, param_dtype);
  }
  void backward(const torch::Tensor& loss, bool sync) override { loss.backward(); }
};

struct NoOptions {};

std::vector<torch::Tensor> optimizer_gradients(const torch::optim::Optimizer& optimizer) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : optimizer_tensors(optimizer))
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

}  // namespace

torch::Tensor Strategy::gradient_norm(torch::optim::Optimizer& optimizer) {
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> grads = optimizer_gradients(optimizer);
  // Norms in float whatever the gradients' dtype (an fp16 norm overflows past 65504).
  torch::Tensor squares =
      grads.empty() ? torch::zeros({}, torch::kFloat)
                    : at::stack(at::_foreach_norm(grads, 2, torch::kFloat)).square().sum();
  if (shards_gradients()) all_reduce_sum(squares);  // every rank takes part, with gradients or not
  return squares.sqrt();
}

torch::Tensor Strategy::clip_grad_norm(torch::optim::Optimizer& optimizer, double max_norm) {
  torch::Tensor norm = gradient_norm(optimizer);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads = optimizer_gradients(optimizer);
  // As torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6), never above 1. The
  // factor in the gradients' dtype: CUDA's one-kernel _foreach_mul_ needs it (bf16-true, 16-true).
  if (!grads.empty())
    at::_foreach_mul_(grads, (max_norm / (norm + 1e-6)).clamp_max(1.0).to(grads[0].scalar_type()));
  return norm;
}

void Strategy::step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) {
  step_unless_overflowed(optimizer, found_inf);
}

TrainingStateBytes Strategy::state_bytes(Model& model, const Optimizer& optimizer) const {
  const double parameters = tensor_bytes(model.parameters());
  return {parameters, parameters, optimizer.state_bytes()};  // a gradient per parameter
}

void step_unless_overflowed(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) {
  if (!found_inf.defined())
    optimizer.step();
  else if (DeviceStepping* on_device = device_stepping(optimizer))
    on_device->step_unless(found_inf);
  else if (found_inf.item<float>() == 0.0f)
    optimizer.step();
  optimizer.zero_grad(/*set_to_none=*/true);
}

void register_single(Registry& registry) {
  registry.add<StrategyPtr(const StrategyContext&)>(
      ComponentKind::strategy, "single", "one process on one device", OptionSet<NoOptions>(),
      [](const NoOptions&, const StrategyContext&) -> StrategyPtr {
        return std::make_shared<SingleDevice>();
      });
}

}  // namespace trainyard
