// The model seam: a module that maps a batch to class logits. Each model is one file that
// registers itself in components/builtin.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "components/batch.h"
#include "components/registry.h"
#include "runner/config/experiment.h"

namespace trainyard {

class Model : public torch::nn::Module {
 public:
  // Logits [B, num_classes] for `batch` (already on the model's device).
  virtual torch::Tensor forward(const Batch& batch) = 0;

  // --- pretrained weights (components/weights/load_weights.h) ---
  // Maps a checkpoint's tensor names to this model's. `checkpoint_names` lets the model recognise
  // the naming scheme (torchvision or timm, say). The function returns "" for tensors the model
  // has no use for (a pretraining head), which are then dropped rather than reported unexpected.
  virtual std::function<std::string(const std::string&)> checkpoint_names_mapper(
      const std::vector<std::string>& checkpoint_names) const {
    return [](const std::string& name) { return name; };
  }
  // True for parameters of the classification head, which is initialised afresh when the
  // checkpoint has none or one of another shape (fine-tuning on a new label set).
  virtual bool is_head(const std::string& name) const { return false; }
  // Re-initialises the classification head as a fresh nn.Linear would be.
  virtual void reset_head() {}

  // Training FLOPs (forward + backward, about 3x forward) for `batch`, counting matrix products
  // and attention as 2 FLOPs per multiply-add; padding tokens count, since they are computed.
  // Drives the achieved TFLOP/s and MFU figures; 0 when unknown.
  virtual double training_flops(const Batch& batch) const { return 0; }
};

using ModelPtr = std::shared_ptr<Model>;

// What a model learns from the rest of the run when it is built.
struct ModelContext {
  int64_t num_classes = 0;  // of the dataset
  int64_t vocab_size = 0;   // of the dataset's tokenizer; 0 for images
};


inline ModelPtr build_model(const Registry& registry, const ComponentChoice& choice,
                            const ModelContext& context) {
  return registry.build<ModelPtr(const ModelContext&)>(ComponentKind::model, choice.name,
                                                       choice.options, context);
}

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace trainyard
