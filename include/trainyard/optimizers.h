// Optimizers by name: adam, adamw, sgd — LibTorch's implementations with their options declared
// once here — and `Optimizer`, what every registered optimizer builds: LibTorch's step together
// with its state for checkpoints.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "trainyard/registry.h"

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

using Parameters = std::vector<torch::Tensor>;

// An optimizer's state for one of its parameters, by the optimizer's own names ("exp_avg",
// "exp_avg_sq", "step" for Adam; "momentum_buffer" for SGD). Empty before its first step.
// Checkpoints store it per parameter, so it outlives the optimizer object and the world size.
using ParameterState = std::map<std::string, torch::Tensor>;

// What every registered optimizer builds: LibTorch's optimizer (parameter groups, step,
// zero_grad) and its state — read, written and sized. The state is part of the product, not found
// by the engine: an optimizer checkpointed without its state would continue as a different run,
// so one that cannot say its state does not compile. tests/optimizer_state_test.cpp round-trips
// every registered optimizer's state bit for bit.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual torch::optim::Optimizer& libtorch() = 0;
  const torch::optim::Optimizer& libtorch() const {
    return const_cast<Optimizer*>(this)->libtorch();
  }
  // One parameter's state; empty before its first step.
  virtual ParameterState parameter_state(const torch::Tensor& parameter) const = 0;
  // Restores what parameter_state returned (possibly moved to another device or layout); an
  // empty state leaves the parameter as before its first step. UserError for missing names.
  virtual void set_parameter_state(const torch::Tensor& parameter, const ParameterState& state) = 0;
  // Bytes of the whole state (moments, momentum buffers, step counts), for the memory figures.
  virtual double state_bytes() const = 0;
};
using OptimizerPtr = std::unique_ptr<Optimizer>;

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

// `state` has every one of `names`; otherwise UserError naming the first missing one (for
// Optimizer::set_parameter_state).
void require_state(const ParameterState& state, std::initializer_list<const char*> names);

// The learning rate every parameter group is set to (schedulers scale it per step).
double base_learning_rate(const ConfigTree& optimizer_options);

}  // namespace trainyard
#pragma GCC visibility pop
