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

}  // namespace trainyard
