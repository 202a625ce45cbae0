// Optimizers by name: adam, adamw, sgd — LibTorch's implementations with their options declared
// once here.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "components/registry.h"

namespace trainyard {

using OptimizerPtr = std::unique_ptr<torch::optim::Optimizer>;
using Parameters = std::vector<torch::Tensor>;

// What an optimizer that steps on the device (Capabilities::steps_on_device) offers the engine:
// a step skipped on the device's own overflow flag, and a learning rate read from a device tensor,
// so the step needs no host read and can be captured in a CUDA graph.
class DeviceStepping {
 public:
  virtual ~DeviceStepping() = default;
  // A step that leaves parameters and optimizer state unchanged where found_inf is 1.
  virtual void step_unless(const std::optional<torch::Tensor>& found_inf) = 0;
  // The learning rate as a tensor on `device`, read by every later step instead of the group's lr:
  // a captured step then follows the schedule, which fills this tensor before each replay.
  virtual torch::Tensor& learning_rate_tensor(const torch::Device& device) = 0;
};

// `optimizer` as DeviceStepping, or nullptr when its step reads the host.
DeviceStepping* device_stepping(torch::optim::Optimizer& optimizer);

inline OptimizerPtr build_optimizer(const Registry& registry, const ComponentChoice& choice,
                                    const Parameters& parameters) {
  return registry.build<OptimizerPtr(const Parameters&)>(ComponentKind::optimizer, choice.name,
                                                         choice.options, parameters);
}

void register_optimizers(Registry& registry);

// Bytes of the tensors' elements (undefined tensors count 0).
double tensor_bytes(const std::vector<torch::Tensor>& tensors);
// Bytes of `optimizer`'s state: moments, momentum buffers, step counts.
double optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

// The optimizer's state for one of its parameters, by name: "exp_avg", "exp_avg_sq", "step" (Adam,
// AdamW; step is a 0-dim float tensor) or "momentum_buffer" (SGD). Empty before its first step.
// Checkpoints store it per parameter, so it outlives the optimizer object and the world size.
using ParameterState = std::map<std::string, torch::Tensor>;
ParameterState parameter_state(const torch::optim::Optimizer& optimizer,
                               const torch::Tensor& parameter);
void set_parameter_state(torch::optim::Optimizer& optimizer, const torch::Tensor& parameter,
                         const ParameterState& state);

// The learning rate every parameter group is set to (schedulers scale it per step).
double base_learning_rate(const ConfigTree& optimizer_options);

}  // namespace trainyard
