#include "runner/engine/task.h"

#include <torch/nn/functional/loss.h>

namespace trainyard {

torch::Tensor TrainingTask::loss(const torch::Tensor& logits, const torch::Tensor& targets) const {
  const torch::Tensor scores = logits.to(torch::kFloat);
  if (!language_model_) return torch::nn::functional::cross_entropy(scores, targets);
  // Every position predicts the next token: [B x T, vocab] against [B x T].
  return torch::nn::functional::cross_entropy(scores.reshape({-1, scores.size(-1)}),
                                              targets.reshape({-1}));
}

torch::Tensor TrainingTask::correct(const torch::Tensor& logits,
                                    const torch::Tensor& targets) const {
  if (language_model_) return {};
  return logits.detach().argmax(1).eq(targets).sum();
}

torch::Tensor TrainingTask::top_k_correct(const torch::Tensor& logits, const torch::Tensor& targets,
                                          int64_t k) const {
  const torch::Tensor scores = logits.detach().to(torch::kFloat);
  const torch::Tensor label = targets.reshape({-1, 1});
  const torch::Tensor label_score = scores.gather(1, label);
  const torch::Tensor later =
      torch::arange(scores.size(1), targets.options()).reshape({1, -1}).gt(label);
  const torch::Tensor rank = scores.gt(label_score).sum(1) +
                             scores.eq(label_score).logical_and(later).sum(1) +
                             scores.isnan().sum(1);
  return rank.lt(k).logical_and(label_score.isnan().logical_not().reshape({-1})).sum();
}

void TrainingTask::count_cells(const torch::Tensor& logits, const torch::Tensor& targets,
                               torch::Tensor& cells) const {
  const int64_t classes = logits.size(1);
  const torch::Tensor cell = targets.reshape({-1}) * classes + logits.detach().argmax(1);
  cells.scatter_add_(0, cell, torch::ones_like(cell));
}

void TrainingTask::count_tallies(const torch::Tensor& logits, const torch::Tensor& targets,
                                 torch::Tensor& tallies) const {
  const torch::Tensor label = targets.reshape({-1});
  const torch::Tensor predicted = logits.detach().argmax(1);
  const torch::Tensor one = torch::ones_like(label);
  tallies[0].scatter_add_(0, label, predicted.eq(label).to(torch::kLong));
  tallies[1].scatter_add_(0, label, one);
  tallies[2].scatter_add_(0, predicted, one);
}

}  // namespace trainyard
