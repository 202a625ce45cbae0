// A linear model whose every forward takes at least `step_ms`: a run whose length tests set in
// wall-clock time, the same on a fast machine and a slow one (a batch's --time-limit must pass
// while it trains, after its first checkpoint).
#include <trainyard/plugin.h>

#include <chrono>
#include <thread>

#include <torch/nn/modules/linear.h>

namespace {
using namespace trainyard;
struct SlowOptions {
  int64_t image_size = 16;
  int64_t num_classes = 4;
  int64_t step_ms = 20;
};
class SlowLinear : public Model {
 public:
  explicit SlowLinear(const SlowOptions& o)
      : step_(std::chrono::milliseconds(o.step_ms)),
        linear_(register_module(
            "linear", torch::nn::Linear(3 * o.image_size * o.image_size, o.num_classes))) {}
  torch::Tensor forward(const Batch& batch) override {
    std::this_thread::sleep_for(step_);
    return linear_->forward(batch.inputs.flatten(1));
  }

 private:
  std::chrono::milliseconds step_;
  torch::nn::Linear linear_;
};
void register_slow(Registry& registry) {
  OptionSet<SlowOptions> options;
  options.add("image_size", &SlowOptions::image_size, "input resolution", at_least(1))
      .add("num_classes", &SlowOptions::num_classes, "classes", at_least(2))
      .add("step_ms", &SlowOptions::step_ms, "the least time of one forward, in ms", at_least(0));
  registry.add<ModelPtr(const ModelContext&)>(
      ComponentKind::model, "slow-linear", "a linear model whose forward sleeps step_ms", options,
      [](const SlowOptions& o, const ModelContext&) -> ModelPtr {
        return std::make_shared<SlowLinear>(o);
      },
      [](const SlowOptions& o) {
        return ModelCapabilities{.image_size = o.image_size, .num_classes = o.num_classes};
      });
}
}  // namespace
TRAINYARD_PLUGIN(register_slow)
