// A model that declares neither blocks() nor training_flops: fsdp shards it as one unit (and says
// so), and its runs have no TFLOP/s or MFU figures rather than zeros.
#include <trainyard/plugin.h>

#include <torch/nn/modules/linear.h>

namespace {
using namespace trainyard;
struct PlainOptions {
  int64_t image_size = 8;
  int64_t num_classes = 3;
};
class PlainLinear : public Model {
 public:
  explicit PlainLinear(const PlainOptions& o)
      : linear_(register_module(
            "linear", torch::nn::Linear(3 * o.image_size * o.image_size, o.num_classes))) {}
  torch::Tensor forward(const Batch& batch) override {
    return linear_->forward(batch.inputs.flatten(1));
  }

 private:
  torch::nn::Linear linear_;
};
void register_plain(Registry& registry) {
  OptionSet<PlainOptions> options;
  options.add("image_size", &PlainOptions::image_size, "input resolution", at_least(1))
      .add("num_classes", &PlainOptions::num_classes, "classes", at_least(2));
  registry.add<ModelPtr(const ModelContext&)>(
      ComponentKind::model, "plain-linear", "a linear model without blocks or FLOPs", options,
      [](const PlainOptions& o, const ModelContext&) -> ModelPtr {
        return std::make_shared<PlainLinear>(o);
      },
      [](const PlainOptions& o) {
        return ModelCapabilities{.image_size = o.image_size, .num_classes = o.num_classes};
      });
}
}  // namespace
TRAINYARD_PLUGIN(register_plain)
