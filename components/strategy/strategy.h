// Strategy owns how parameters, gradients and optimizer state live across devices. The engine's
// step reads the same under every strategy: strategy.forward(model, batch),
// strategy.backward(loss), strategy.step(optimizer).
//
//   single  one process, one device
//   ddp     every rank holds the whole model; gradients are averaged while backward runs
//   zero2   parameters replicated; gradients and optimizer state sharded (DeepSpeed stage 2)
//   fsdp    parameters, gradients and optimizer state sharded; a block's parameters are gathered
//           just before it runs (PyTorch FSDP, full shard)
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>

#include <torch/optim/optimizer.h>

#include "trainyard/model.h"
#include "trainyard/optimizers.h"
#include "trainyard/registry.h"

namespace trainyard {

// Bytes this rank holds for training state, by the strategy's own accounting: what it keeps between
// steps (parameters, optimizer state) and the gradients the optimizer step reads.
struct TrainingStateBytes {
  double parameters = 0;
  double gradients = 0;
  double optimizer_state = 0;
};

// An error inside a collective (a broadcast a rank could not take part in): the ranks are out of
// step, so the run ends — train.micro_batch_size: auto never retries it.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Moves `model` to `device` in `param_dtype` and prepares it (every rank starts from rank 0's
  // weights). Called once, before optimizer_parameters().
  virtual void setup(Model& model, const torch::Device& device, c10::ScalarType param_dtype) = 0;
  // What the optimizer updates: the model's parameters, or this rank's shards of them.
  virtual std::vector<torch::Tensor> optimizer_parameters(Model& model) {
    return model.parameters();
  }
  // The model's logits for `batch`; sharding strategies gather parameters around it.
  virtual torch::Tensor forward(Model& model, const Batch& batch) { return model.forward(batch); }
  // Backward of `loss`. `sync` is false on the micro-batches of a gradient-accumulation step that
  // only accumulate (nothing is communicated then); true on the last.
  virtual void backward(const torch::Tensor& loss, bool sync) = 0;
  // Communicates the gradients as a syncing backward would have at its end, after micro-batches
  // whose backwards all ran with `sync` false (train.micro_batch_size: auto under several ranks,
  // which first agree that no rank ran out of memory). Collective; nothing to do with one process.
  virtual void synchronize_gradients() {}
  // The global L2 norm of the optimizer's gradients (over every rank's share when sharded), in
  // float, as a device tensor: nothing is read on the host. Collective when sharded.
  torch::Tensor gradient_norm(torch::optim::Optimizer& optimizer);
  // Clips the global L2 norm of the optimizer's gradients to `max_norm` and returns the norm
  // before, as torch.nn.utils.clip_grad_norm_ does, but as a device tensor: nothing is read on
  // the host, so a step with clipping needs no synchronisation and can be captured.
  torch::Tensor clip_grad_norm(torch::optim::Optimizer& optimizer, double max_norm);
  // One optimizer step, then clears the gradients. `found_inf` (from the fp16 loss scaler;
  // undefined otherwise) is 1 when the gradients overflowed on any rank: the step is then skipped.
  virtual void step(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf);
  // Called before each evaluation: with several ranks, each is given rank 0's buffers (BatchNorm's
  // running statistics, which rank 0 saves), so every rank evaluates the same model and all agree
  // on the best epoch and on early stopping. Collective.
  virtual void before_evaluation(Model& model) {}
  // Calls `fn` while every parameter of the model is whole on this rank (to copy, restore or save
  // weights); what `fn` writes into them is kept.
  virtual void with_full_parameters(Model& model, const std::function<void()>& fn) { fn(); }
  virtual TrainingStateBytes state_bytes(Model& model, const Optimizer& optimizer) const;

  // Checkpoints store optimizer state per model parameter, whole, so that any strategy and world
  // size can resume it. to_model_layout takes tensors laid out like optimizer_parameters() (this
  // rank's shards under zero2 and fsdp; 0-dim tensors, such as Adam's step, are per-tensor scalars)
  // and returns whole tensors laid out like model.parameters(); to_optimizer_layout is the reverse.
  // Both are collective: every rank calls them.
  virtual std::vector<torch::Tensor> to_model_layout(
      Model& model, const std::vector<torch::Tensor>& optimizer_layout) {
    return optimizer_layout;
  }
  virtual std::vector<torch::Tensor> to_optimizer_layout(
      Model& model, const std::vector<torch::Tensor>& model_layout) {
    return model_layout;
  }

  // Bytes of the gradient and parameter collectives issued so far (the size of each all-reduced,
  // reduce-scattered or all-gathered buffer, as NCCL's tests count "size"); 0 with one process.
  virtual double communicated_bytes() const { return 0; }
  // What the run details should say of how it distributed the model (after setup).
  virtual std::map<std::string, std::string> attributes() const { return {}; }

  // Sums `tensor` over the ranks, in place (nothing to do with one rank); the same for the maximum.
  virtual void all_reduce_sum(torch::Tensor& tensor) {}
  virtual void all_reduce_max(torch::Tensor& tensor) {}
  virtual int world_size() const { return 1; }
  // The dtype gradients are averaged in across ranks (the strategy's reduce_dtype option).
  virtual c10::ScalarType reduce_dtype() const { return c10::ScalarType::Float; }
  virtual int rank() const { return 0; }

 protected:
  // True when each rank holds a disjoint share of the gradients (zero2, fsdp): their norm is then
  // summed over the ranks.
  virtual bool shards_gradients() const { return false; }
};

using StrategyPtr = std::shared_ptr<Strategy>;

// optimizer.step(), unless `found_inf` (the loss scaler's flag; undefined: no scaler) is 1 —
// decided on the device for fused optimizers, after one host read for the others — then
// zero_grad().
void step_unless_overflowed(torch::optim::Optimizer& optimizer, const torch::Tensor& found_inf);

struct StrategyContext {
  int64_t timeout_s = 600;  // runtime.timeout_s: how long a rendezvous or collective may take
  torch::Device device{torch::kCPU};  // the training device: picks the backend (gloo or nccl)
};

inline StrategyPtr build_strategy(const Registry& registry, const ComponentChoice& choice,
                                  const StrategyContext& context) {
  return registry.build<StrategyPtr(const StrategyContext&)>(ComponentKind::strategy, choice.name,
                                                             choice.options, context);
}

// The built-in strategies, each registered by its own file (components/builtin.cpp calls them).
void register_single(Registry& registry);  // strategy.cpp
void register_ddp(Registry& registry);     // ddp.cpp
void register_zero2(Registry& registry);   // zero2.cpp
void register_fsdp(Registry& registry);    // fsdp.cpp

}  // namespace trainyard
