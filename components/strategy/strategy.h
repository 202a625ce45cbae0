// Strategy owns how parameters, gradients and optimizer state live across devices. The engine's
// step reads the same under every strategy: forward, strategy.backward(loss), strategy.step().
#pragma once

#include <memory>

#include <torch/optim/optimizer.h>

#include "components/models/model.h"
#include "components/registry.h"

namespace trainyard {

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Moves `model` to `device` (in `param_dtype`) and prepares it; called before the optimizer is
  // built from model.parameters().
  virtual void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) = 0;
  virtual void backward(const torch::Tensor& loss) = 0;
  // Clips the global gradient norm to `max_norm`; returns the norm before clipping.
  virtual double clip_grad_norm(Model& model, double max_norm) = 0;
  // One optimizer step, then clears the gradients. `found_inf` (from the fp16 loss scaler; undefined
  // otherwise) is 1 when the gradients overflowed: the step is then skipped — on the device for
  // fused optimizers, after one host read for the others.
  virtual void step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf) = 0;
  // Sums `tensor` over the ranks, in place (nothing to do with one rank); the same for the maximum.
  virtual void all_reduce_sum(torch::Tensor& tensor) {}
  virtual void all_reduce_max(torch::Tensor& tensor) {}
  virtual int world_size() const { return 1; }
  virtual int rank() const { return 0; }
};

using StrategyPtr = std::shared_ptr<Strategy>;

// optimizer.step(), unless `found_inf` (the loss scaler's flag; undefined: no scaler) is 1 — decided
// on the device for fused optimizers, after one host read for the others — then zero_grad().
void step_unless_overflowed(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf);

struct StrategyContext {
  int64_t timeout_s = 600;  // runtime.timeout_s: how long a rendezvous or collective may take
};

inline StrategyPtr build_strategy(const Registry& registry, const std::string& name, const StrategyContext& context) {
  return registry.build<StrategyPtr(const StrategyContext&)>(ComponentKind::strategy, name, {}, context);
}

void register_strategies(Registry& registry);
void register_ddp(Registry& registry);

}  // namespace trainyard
