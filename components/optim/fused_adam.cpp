#include "components/optim/fused_adam.h"

#include <ATen/ATen.h>

namespace trainyard {

FusedAdam::FusedAdam(const std::vector<torch::Tensor>& parameters,
                     const torch::optim::AdamWOptions& options, bool decoupled_weight_decay)
    : torch::optim::Optimizer({torch::optim::OptimizerParamGroup(parameters)},
                              std::make_unique<torch::optim::AdamWOptions>(options)),
      decoupled_(decoupled_weight_decay) {
  TORCH_CHECK(!options.amsgrad(), "FusedAdam does not support amsgrad");
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  TORCH_CHECK(!closure, "FusedAdam takes no closure");
  step_unless(std::nullopt);
  return {};
}

void FusedAdam::step_unless(const std::optional<torch::Tensor>& found_inf) {
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto [it, created] = moments_.try_emplace(p.unsafeGetTensorImpl());
      if (created)
        it->second = {torch::zeros_like(p, torch::MemoryFormat::Preserve),
                      torch::zeros_like(p, torch::MemoryFormat::Preserve),
                      torch::zeros({}, p.options().dtype(torch::kFloat))};
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(it->second.exp_avg);
      exp_avg_sqs.push_back(it->second.exp_avg_sq);
      steps.push_back(it->second.step);
    }
    if (params.empty()) continue;
    at::_foreach_add_(steps, 1);  // as torch.optim does before the fused kernel
    auto [beta1, beta2] = o.betas();
    const double weight_decay = o.weight_decay(), eps = o.eps(), lr = o.lr();
    if (lr_tensor_.defined() && decoupled_)
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, lr_tensor_, beta1, beta2,
                        weight_decay, eps,
                        /*amsgrad=*/false, /*maximize=*/false, std::nullopt, found_inf);
    else if (lr_tensor_.defined())
      at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, lr_tensor_, beta1, beta2,
                       weight_decay, eps,
                       /*amsgrad=*/false, /*maximize=*/false, std::nullopt, found_inf);
    else if (decoupled_)
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, lr, beta1, beta2,
                        weight_decay, eps,
                        /*amsgrad=*/false, /*maximize=*/false, std::nullopt, found_inf);
    else
      at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, lr, beta1, beta2,
                       weight_decay, eps,
                       /*amsgrad=*/false, /*maximize=*/false, std::nullopt, found_inf);
    if (found_inf)  // a skipped step does not count
      at::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), found_inf->reshape({})));
  }
}

torch::Tensor& FusedAdam::learning_rate_tensor(const torch::Device& device) {
  if (!lr_tensor_.defined()) {
    const double lr = param_groups().at(0).options().get_lr();
    lr_tensor_ = torch::full({}, lr, torch::TensorOptions().dtype(torch::kFloat).device(device));
  }
  return lr_tensor_;
}

ParameterState FusedAdam::parameter_state(const torch::Tensor& parameter) const {
  auto it = moments_.find(parameter.unsafeGetTensorImpl());
  if (it == moments_.end()) return {};
  const Moments& m = it->second;
  return {{"exp_avg", m.exp_avg}, {"exp_avg_sq", m.exp_avg_sq}, {"step", m.step}};
}

void FusedAdam::set_parameter_state(const torch::Tensor& p, const ParameterState& state) {
  if (state.empty()) return;
  require_state(state, {"exp_avg", "exp_avg_sq", "step"});
  moments_[p.unsafeGetTensorImpl()] = {
      state.at("exp_avg").to(p.options()), state.at("exp_avg_sq").to(p.options()),
      state.at("step").to(p.options().dtype(torch::kFloat)).reshape({})};
}

double FusedAdam::state_bytes() const {
  double bytes = 0;
  for (const auto& [impl, m] : moments_) bytes += tensor_bytes({m.exp_avg, m.exp_avg_sq, m.step});
  return bytes;
}

}  // namespace trainyard
