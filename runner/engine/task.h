// What a run optimises and measures, by its model's task (ModelCapabilities::task, common/task.h):
//   classification  logits [B, classes] against class indices [B]: cross-entropy, accuracy; its
//                   loss averages over samples
//   causal-lm       logits [B, T, vocab] against the next tokens [B, T]: cross-entropy over every
//                   position, perplexity (the exponential of that loss); its loss averages over
//                   tokens, and throughput counts them too
// The engine asks it (and the task's traits), so the training step, the figures recorded and the
// lines logged hold for every model.
#pragma once

#include <string>

#include <torch/types.h>

#include "trainyard/task.h"

namespace trainyard {

class TrainingTask {
 public:
  explicit TrainingTask(Task task) : task_(task), language_model_(task == Task::causal_lm) {}

  const TaskTraits& traits() const { return trainyard::traits(task_); }
  bool language_model() const { return language_model_; }

  // The mean loss of `logits` against `targets`, in float.
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets) const;
  // What that mean is over: the samples, or every target token.
  int64_t loss_units(const torch::Tensor& targets) const {
    return language_model_ ? targets.numel() : targets.size(0);
  }
  // Correct predictions as a device tensor (int64); undefined for a language model, which has no
  // accuracy.
  torch::Tensor correct(const torch::Tensor& logits, const torch::Tensor& targets) const;

 private:
  Task task_;
  bool language_model_;
};

}  // namespace trainyard
