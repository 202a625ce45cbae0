#include "trainyard/optimizers.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <fmt/format.h>

#include "components/optim/fused_adam.h"
#include "trainyard/error.h"

namespace trainyard {

namespace {

struct AdamOptions {
  double lr = 5e-5;  // the reference studies' learning rate
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool fused = true;
};

struct AdamWOptions {
  double lr = 5e-5;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // PyTorch's AdamW default
  bool fused = true;
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

template <class Opts>
OptionSet<Opts> adam_family_options() {
  OptionSet<Opts> options;
  options
      .add("lr", &Opts::lr,
           "learning rate; the default 5e-5 is the reference studies' fine-tuning rate (from "
           "pretrained weights); from scratch a network usually wants 1e-3 or more",
           greater_than(0))
      .add("beta1", &Opts::beta1, "decay of the first-moment average", between(0, 1))
      .add("beta2", &Opts::beta2, "decay of the second-moment average", between(0, 1))
      .add("eps", &Opts::eps, "term added to the denominator", greater_than(0))
      .add("weight_decay", &Opts::weight_decay, "weight decay", at_least(0))
      .add("fused", &Opts::fused,
           "ATen's fused kernel: one pass over all parameters per step, step counts on the device");
  return options;
}

// The fused kernel (FusedAdam) keeps its step and learning rate on the device.
template <class Opts>
OptimizerCapabilities fused_capabilities(const Opts& o) {
  return OptimizerCapabilities{.steps_on_device = o.fused};
}

torch::Tensor step_tensor(int64_t step) { return torch::tensor(static_cast<float>(step)); }

// LibTorch's optimizers keep state by the parameter's TensorImpl, created at its first step.
template <class State>
const State* libtorch_state(const torch::optim::Optimizer& optimizer,
                            const torch::Tensor& parameter) {
  auto it = optimizer.state().find(parameter.unsafeGetTensorImpl());
  return it == optimizer.state().end() ? nullptr : dynamic_cast<const State*>(it->second.get());
}

// LibTorch's Adam or AdamW (the unfused path), whose state per parameter is State.
template <class Impl, class State>
class LibTorchAdam final : public Optimizer {
 public:
  template <class Options>
  LibTorchAdam(const Parameters& parameters, const Options& options) : impl_(parameters, options) {}
  torch::optim::Optimizer& libtorch() override { return impl_; }

  ParameterState parameter_state(const torch::Tensor& p) const override {
    const State* s = libtorch_state<State>(impl_, p);
    if (s == nullptr) return {};
    return {{"exp_avg", s->exp_avg()},
            {"exp_avg_sq", s->exp_avg_sq()},
            {"step", step_tensor(s->step())}};
  }
  void set_parameter_state(const torch::Tensor& p, const ParameterState& state) override {
    if (state.empty()) return;
    require_state(state, {"exp_avg", "exp_avg_sq", "step"});
    auto s = std::make_unique<State>();
    s->exp_avg(state.at("exp_avg").to(p.options()));
    s->exp_avg_sq(state.at("exp_avg_sq").to(p.options()));
    s->step(static_cast<int64_t>(state.at("step").item<float>()));
    impl_.state()[p.unsafeGetTensorImpl()] = std::move(s);
  }
  double state_bytes() const override {
    double bytes = 0;
    for (const auto& [key, state] : impl_.state()) {
      const auto& s = static_cast<const State&>(*state);
      bytes += tensor_bytes({s.exp_avg(), s.exp_avg_sq(), s.max_exp_avg_sq()});
    }
    return bytes;
  }

 private:
  Impl impl_;
};

// LibTorch's SGD: a momentum buffer per parameter when momentum > 0, nothing otherwise.
class LibTorchSgd final : public Optimizer {
 public:
  LibTorchSgd(const Parameters& parameters, const torch::optim::SGDOptions& options)
      : impl_(parameters, options) {}
  torch::optim::Optimizer& libtorch() override { return impl_; }

  ParameterState parameter_state(const torch::Tensor& p) const override {
    const auto* s = libtorch_state<torch::optim::SGDParamState>(impl_, p);
    if (s == nullptr || !s->momentum_buffer().defined()) return {};
    return {{"momentum_buffer", s->momentum_buffer()}};
  }
  void set_parameter_state(const torch::Tensor& p, const ParameterState& state) override {
    if (state.empty()) return;
    require_state(state, {"momentum_buffer"});
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(state.at("momentum_buffer").to(p.options()));
    impl_.state()[p.unsafeGetTensorImpl()] = std::move(s);
  }
  double state_bytes() const override {
    double bytes = 0;
    for (const auto& [key, state] : impl_.state())
      bytes +=
          tensor_bytes({static_cast<const torch::optim::SGDParamState&>(*state).momentum_buffer()});
    return bytes;
  }

 private:
  torch::optim::SGD impl_;
};

}  // namespace

void register_optimizers(Registry& registry) {
  registry.add<OptimizerPtr(const Parameters&)>(
      ComponentKind::optimizer, "adam", "Adam (Kingma & Ba); L2 weight decay added to the gradient",
      adam_family_options<AdamOptions>(),
      [](const AdamOptions& o, const Parameters& parameters) {
        if (o.fused)
          return OptimizerPtr(std::make_unique<FusedAdam>(parameters,
                                                          torch::optim::AdamWOptions(o.lr)
                                                              .betas({o.beta1, o.beta2})
                                                              .eps(o.eps)
                                                              .weight_decay(o.weight_decay),
                                                          /*decoupled_weight_decay=*/false));
        return OptimizerPtr(
            std::make_unique<LibTorchAdam<torch::optim::Adam, torch::optim::AdamParamState>>(
                parameters, torch::optim::AdamOptions(o.lr)
                                .betas({o.beta1, o.beta2})
                                .eps(o.eps)
                                .weight_decay(o.weight_decay)));
      },
      fused_capabilities<AdamOptions>);
  registry.add<OptimizerPtr(const Parameters&)>(
      ComponentKind::optimizer, "adamw", "AdamW: Adam with decoupled weight decay",
      adam_family_options<AdamWOptions>(),
      [](const AdamWOptions& o, const Parameters& parameters) {
        auto options = torch::optim::AdamWOptions(o.lr)
                           .betas({o.beta1, o.beta2})
                           .eps(o.eps)
                           .weight_decay(o.weight_decay);
        if (o.fused)
          return OptimizerPtr(
              std::make_unique<FusedAdam>(parameters, options, /*decoupled_weight_decay=*/true));
        return OptimizerPtr(
            std::make_unique<LibTorchAdam<torch::optim::AdamW, torch::optim::AdamWParamState>>(
                parameters, options));
      },
      fused_capabilities<AdamWOptions>);
  OptionSet<SgdOptions> sgd;
  sgd.add("lr", &SgdOptions::lr, "learning rate", greater_than(0))
      .add("momentum", &SgdOptions::momentum, "momentum factor", between(0, 1))
      .add("nesterov", &SgdOptions::nesterov, "Nesterov momentum (needs momentum > 0)")
      .add("weight_decay", &SgdOptions::weight_decay, "L2 weight decay", at_least(0))
      .check([](const SgdOptions& o) -> std::optional<std::string> {
        if (o.nesterov && o.momentum <= 0) return "nesterov needs momentum > 0";
        return std::nullopt;
      });
  registry.add<OptimizerPtr(const Parameters&)>(
      ComponentKind::optimizer, "sgd", "stochastic gradient descent with optional momentum", sgd,
      [](const SgdOptions& o, const Parameters& parameters) {
        return OptimizerPtr(
            std::make_unique<LibTorchSgd>(parameters, torch::optim::SGDOptions(o.lr)
                                                          .momentum(o.momentum)
                                                          .nesterov(o.nesterov)
                                                          .weight_decay(o.weight_decay)));
      });
}

DeviceStepping* device_stepping(torch::optim::Optimizer& optimizer) {
  return dynamic_cast<DeviceStepping*>(&optimizer);
}

double base_learning_rate(const ConfigTree& optimizer_options) {
  const ConfigValue* lr = optimizer_options.find("lr");
  std::string expected;
  double value = 0;
  if (lr == nullptr || !decode_value(lr->node, value, expected))
    throw std::logic_error("optimizer options without a resolved 'lr'");
  return value;
}

}  // namespace trainyard
