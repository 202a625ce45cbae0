#include "components/precision/loss_scaler.h"

#include <ATen/ATen.h>

namespace trainyard {

LossScaler::LossScaler(const torch::Device& device, LossScalerOptions options)
    : options_(options),
      scale_(torch::full({1}, options.init_scale,
                         torch::TensorOptions().dtype(torch::kFloat).device(device))),
      growth_tracker_(torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt).device(device))),
      found_inf_(torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(device))),
      skipped_(torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(device))) {}

void LossScaler::unscale(torch::optim::Optimizer& optimizer) {
  found_inf_.zero_();
  std::vector<torch::Tensor> gradients;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) gradients.push_back(p.grad());
  if (gradients.empty()) return;
  at::_amp_foreach_non_finite_check_and_unscale_(gradients, found_inf_, scale_.reciprocal());
}

void LossScaler::load_state(const std::map<std::string, torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  scale_.copy_(state.at("scale").reshape_as(scale_));
  growth_tracker_.copy_(state.at("growth_tracker").reshape_as(growth_tracker_));
  skipped_.copy_(state.at("skipped").reshape_as(skipped_));
}

bool LossScaler::step_allowed() const { return found_inf_.item<float>() == 0.0f; }

void LossScaler::update() {
  skipped_ += found_inf_;
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
}

}  // namespace trainyard
