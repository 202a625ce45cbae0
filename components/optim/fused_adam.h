// Adam and AdamW on ATen's fused kernels (_fused_adam_, _fused_adamw_): one pass over all
// parameters per step instead of a dozen small kernels per parameter, with the step counts kept on
// the device, so a step never waits for the host. With the fp16 loss scaler, step_unless(found_inf)
// skips the update on the device when the gradients overflowed — again without a host
// synchronisation.
#pragma once

#include <optional>
#include <unordered_map>

#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>

#include "trainyard/optimizers.h"

namespace trainyard {

class FusedAdam : public torch::optim::Optimizer, public Optimizer, public DeviceStepping {
 public:
  // decoupled_weight_decay: AdamW (decay applied to the weights) rather than Adam (L2 added to the
  // gradient). amsgrad is not supported.
  FusedAdam(const std::vector<torch::Tensor>& parameters, const torch::optim::AdamWOptions& options,
            bool decoupled_weight_decay);

  torch::Tensor step(LossClosure closure = nullptr) override;

  // A step that leaves parameters, moments and step counts unchanged where found_inf is 1.
  void step_unless(const std::optional<torch::Tensor>& found_inf) override;

  // The learning rate as a tensor on `device`, read by every later step instead of the group's lr:
  // a step captured in a CUDA graph then follows the schedule, which fills this tensor before each
  // replay (the group's lr, a double, would be frozen into the graph).
  torch::Tensor& learning_rate_tensor(const torch::Device& device) override;

  // trainyard::Optimizer: "exp_avg", "exp_avg_sq" and "step" (a float32 scalar on the
  // parameter's device) per parameter, as LibTorch's Adam names them.
  torch::optim::Optimizer& libtorch() override { return *this; }
  ParameterState parameter_state(const torch::Tensor& parameter) const override;
  void set_parameter_state(const torch::Tensor& parameter, const ParameterState& state) override;
  double state_bytes() const override;

 private:
  struct Moments {
    torch::Tensor exp_avg, exp_avg_sq, step;
  };
  bool decoupled_;
  torch::Tensor lr_tensor_;
  std::unordered_map<c10::TensorImpl*, Moments> moments_;
};

}  // namespace trainyard
