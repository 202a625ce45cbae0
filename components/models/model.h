// The model seam: a module that maps a batch to class logits. Each model is one file that
// registers itself in components/builtin.cpp.
#pragma once

#include <memory>

#include <torch/nn/module.h>

#include "components/batch.h"
#include "components/registry.h"
#include "runner/config/experiment.h"

namespace trainyard {

class Model : public torch::nn::Module {
 public:
  // Logits [B, num_classes] for `batch` (already on the model's device).
  virtual torch::Tensor forward(const Batch& batch) = 0;
};

using ModelPtr = std::shared_ptr<Model>;

// What a model learns from the rest of the run when it is built.
struct ModelContext {
  int64_t num_classes = 0;  // of the dataset
};


inline ModelPtr build_model(const Registry& registry, const ComponentChoice& choice,
                            const ModelContext& context) {
  return registry.build<ModelPtr(const ModelContext&)>(ComponentKind::model, choice.name,
                                                       choice.options, context);
}

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace trainyard
