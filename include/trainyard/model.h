// The model seam: a module that maps a batch to class logits. Each model is one file that
// registers itself in components/builtin.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "trainyard/batch.h"
#include "trainyard/registry.h"

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

// Called around each block's forward by a sharding strategy (fsdp), which gathers the block's
// parameters just before and frees them after.
class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  virtual void before_block(size_t index) = 0;
  virtual void after_block(size_t index, const torch::Tensor& output) = 0;
};

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

  // --- sharding (components/strategy/fsdp.cpp) ---
  // The model's repeated blocks in forward order. fsdp shards each block's parameters as one unit;
  // the parameters outside every block form one more unit.
  virtual std::vector<std::shared_ptr<torch::nn::Module>> blocks() const { return {}; }
  void set_block_hooks(BlockHooks* hooks) { block_hooks_ = hooks; }

 protected:
  // Models call each of blocks() through this, so that a sharding strategy sees it run.
  torch::Tensor run_block(size_t index, const std::function<torch::Tensor()>& forward) {
    if (!block_hooks_) return forward();
    block_hooks_->before_block(index);
    torch::Tensor output = forward();
    block_hooks_->after_block(index, output);
    return output;
  }

 private:
  BlockHooks* block_hooks_ = nullptr;
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
#pragma GCC visibility pop
