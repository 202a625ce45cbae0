// The smallest complete model plugin: a two-layer perceptron over flattened images. Copy this
// folder to start your own (docs/plugins.md).
#include <trainyard/plugin.h>

#include <torch/nn/modules/linear.h>

namespace {

using namespace trainyard;

struct MlpOptions {
  int64_t image_size = 32;
  int64_t hidden = 128;
  int64_t num_classes = 10;
};

class Mlp : public Model {
 public:
  explicit Mlp(const MlpOptions& o)
      : hidden_(register_module("hidden",
                                torch::nn::Linear(3 * o.image_size * o.image_size, o.hidden))),
        head_(register_module("head", torch::nn::Linear(o.hidden, o.num_classes))) {}

  torch::Tensor forward(const Batch& batch) override {
    return head_->forward(torch::relu(hidden_->forward(batch.inputs.flatten(1))));
  }
  bool is_head(const std::string& name) const override { return name.rfind("head.", 0) == 0; }
  void reset_head() override { head_->reset_parameters(); }
  // 2 FLOPs per multiply-add, times 3 for forward and backward: what MFU is computed from.
  double training_flops(const Batch& batch) const override {
    return 6.0 * batch.size() * (hidden_->weight.numel() + head_->weight.numel());
  }

 private:
  torch::nn::Linear hidden_, head_;
};

void register_mlp(Registry& registry) {
  OptionSet<MlpOptions> options;
  options
      .add("image_size", &MlpOptions::image_size, "input resolution (square images)", at_least(1))
      .add("hidden", &MlpOptions::hidden, "hidden units", at_least(1))
      .add("num_classes", &MlpOptions::num_classes, "classes; must match the dataset", at_least(2));
  registry.add<ModelPtr(const ModelContext&)>(
      ComponentKind::model, "mlp", "two-layer perceptron (example plugin)", options,
      [](const MlpOptions& o, const ModelContext&) -> ModelPtr { return std::make_shared<Mlp>(o); },
      [](const MlpOptions& o) {
        return ModelCapabilities{.image_size = o.image_size, .num_classes = o.num_classes};
      });
}

}  // namespace

TRAINYARD_PLUGIN(register_mlp)
