// What a run optimises and measures, by its model's task (ModelCapabilities::task,
// trainyard/task.h):
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
  // accuracy. A prediction is the first highest logit.
  torch::Tensor correct(const torch::Tensor& logits, const torch::Tensor& targets) const;
  // Samples whose label is among the `k` highest logits, as a device tensor (int64). Ties are
  // broken as scikit-learn's top_k_accuracy_score breaks them (a stable sort, reversed): of equal
  // logits the later class ranks first. Counted without a sort: the label's rank is the number of
  // classes scored above it, plus those scored equal with a higher index. A NaN ranks above every
  // number (a label scored NaN is never a hit: a diverged model finds nothing).
  torch::Tensor top_k_correct(const torch::Tensor& logits, const torch::Tensor& targets,
                              int64_t k) const;
  // The confusion matrix's cells (int64 [classes x classes] flattened, row the label, column the
  // prediction), added to `cells`; no host synchronisation.
  void count_cells(const torch::Tensor& logits, const torch::Tensor& targets,
                   torch::Tensor& cells) const;
  // Each class's correct predictions, samples labelled and samples predicted (int64 [3, classes]),
  // added to `tallies`: what the figures need when the cells are too many to keep.
  void count_tallies(const torch::Tensor& logits, const torch::Tensor& targets,
                     torch::Tensor& tallies) const;

 private:
  Task task_;
  bool language_model_;
};

}  // namespace trainyard
