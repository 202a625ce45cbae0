// Dynamic loss scaling for fp16 training (`16-mixed`), the C++ counterpart of torch.amp.GradScaler,
// which LibTorch lacks. The loss is multiplied by the scale before backward so small fp16 gradients
// do not flush to zero; the gradients are divided by it before clipping and the step; a step whose
// gradients hold inf or NaN is skipped and the scale halved; after `growth_interval` clean steps in
// a row the scale doubles. Built on ATen's own kernels (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_), so the scale never leaves the device.
#pragma once

#include <map>
#include <string>

#include <torch/optim/optimizer.h>
#include <torch/types.h>

namespace trainyard {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  LossScaler(const torch::Device& device, LossScalerOptions options = {});

  torch::Tensor scale(const torch::Tensor& loss) const { return loss * scale_; }

  // Divides every gradient of `optimizer` by the scale and records whether any is inf or NaN.
  // Call once per step, after backward and before clipping.
  void unscale(torch::optim::Optimizer& optimizer);

  // 1 when the last unscale() found inf or NaN, else 0 (float32 [1], on the device). Strategies
  // skip the step on it; fused optimizers without reading it back to the host.
  const torch::Tensor& found_inf() const { return found_inf_; }
  // The same as a bool: one host synchronisation.
  bool step_allowed() const;

  // Grows or backs off the scale for the next step, and counts a skipped step (on the device).
  void update();

  double current_scale() const { return scale_.item<double>(); }
  // The scale, clean-step count and skipped-step count, for checkpoints.
  std::map<std::string, torch::Tensor> state() const {
    return {{"scale", scale_}, {"growth_tracker", growth_tracker_}, {"skipped", skipped_}};
  }
  void load_state(const std::map<std::string, torch::Tensor>& state);

  int64_t skipped_steps() const { return static_cast<int64_t>(skipped_.item<float>()); }

 private:
  LossScalerOptions options_;
  torch::Tensor scale_;           // float32 [1]
  torch::Tensor growth_tracker_;  // int32 [1]: clean steps in a row
  torch::Tensor found_inf_;       // float32 [1]: 1 when this step's gradients overflowed
  torch::Tensor skipped_;         // float32 [1]: steps skipped so far
};

}  // namespace trainyard
