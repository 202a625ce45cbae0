#include "components/optim/optimizers.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <fmt/format.h>

#include "common/error.h"
#include "components/optim/fused_adam.h"

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
  options.add("lr", &Opts::lr, "learning rate", greater_than(0))
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
Capabilities fused_capabilities(const Opts& o) {
  return Capabilities{.steps_on_device = o.fused};
}

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
            std::make_unique<torch::optim::Adam>(parameters, torch::optim::AdamOptions(o.lr)
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
        return OptimizerPtr(std::make_unique<torch::optim::AdamW>(parameters, options));
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
            std::make_unique<torch::optim::SGD>(parameters, torch::optim::SGDOptions(o.lr)
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

double tensor_bytes(const std::vector<torch::Tensor>& tensors) {
  double bytes = 0;
  for (const auto& t : tensors)
    if (t.defined()) bytes += static_cast<double>(t.numel() * t.element_size());
  return bytes;
}

double optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  if (const auto* fused = dynamic_cast<const FusedAdam*>(&optimizer))
    return tensor_bytes(fused->state_tensors());
  double bytes = 0;
  for (const auto& [key, state] : optimizer.state()) {
    if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(state.get()))
      bytes += tensor_bytes({adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()});
    else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(state.get()))
      bytes += tensor_bytes({adamw->exp_avg(), adamw->exp_avg_sq(), adamw->max_exp_avg_sq()});
    else if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(state.get()))
      bytes += tensor_bytes({sgd->momentum_buffer()});
  }
  return bytes;
}

namespace {

// LibTorch's optimizers keep state by the parameter's TensorImpl, created at the first step.
template <class State>
const State* libtorch_state(const torch::optim::Optimizer& optimizer,
                            const torch::Tensor& parameter) {
  auto it = optimizer.state().find(parameter.unsafeGetTensorImpl());
  return it == optimizer.state().end() ? nullptr : dynamic_cast<const State*>(it->second.get());
}

torch::Tensor step_tensor(int64_t step) { return torch::tensor(static_cast<float>(step)); }

template <class State>
ParameterState adam_state(const State& s) {
  return {
      {"exp_avg", s.exp_avg()}, {"exp_avg_sq", s.exp_avg_sq()}, {"step", step_tensor(s.step())}};
}

template <class State>
void set_adam_state(torch::optim::Optimizer& optimizer, const torch::Tensor& p,
                    const ParameterState& state) {
  auto s = std::make_unique<State>();
  s->exp_avg(state.at("exp_avg").to(p.options()));
  s->exp_avg_sq(state.at("exp_avg_sq").to(p.options()));
  s->step(static_cast<int64_t>(state.at("step").item<float>()));
  optimizer.state()[p.unsafeGetTensorImpl()] = std::move(s);
}

}  // namespace

ParameterState parameter_state(const torch::optim::Optimizer& optimizer,
                               const torch::Tensor& parameter) {
  if (const auto* fused = dynamic_cast<const FusedAdam*>(&optimizer)) {
    auto m = fused->moments(parameter);
    if (!m) return {};
    return {{"exp_avg", m->exp_avg}, {"exp_avg_sq", m->exp_avg_sq}, {"step", m->step}};
  }
  if (const auto* s = libtorch_state<torch::optim::AdamParamState>(optimizer, parameter))
    return adam_state(*s);
  if (const auto* s = libtorch_state<torch::optim::AdamWParamState>(optimizer, parameter))
    return adam_state(*s);
  if (const auto* s = libtorch_state<torch::optim::SGDParamState>(optimizer, parameter))
    return s->momentum_buffer().defined()
               ? ParameterState{{"momentum_buffer", s->momentum_buffer()}}
               : ParameterState{};
  return {};
}

void set_parameter_state(torch::optim::Optimizer& optimizer, const torch::Tensor& p,
                         const ParameterState& state) {
  if (state.empty()) return;
  auto require = [&](std::initializer_list<const char*> keys) {
    for (const char* key : keys)
      if (!state.count(key))
        throw UserError(fmt::format("optimizer state without '{}' for this optimizer", key));
  };
  if (auto* fused = dynamic_cast<FusedAdam*>(&optimizer)) {
    require({"exp_avg", "exp_avg_sq", "step"});
    fused->set_moments(p,
                       {state.at("exp_avg").to(p.options()), state.at("exp_avg_sq").to(p.options()),
                        state.at("step").to(p.options().dtype(torch::kFloat)).reshape({})});
  } else if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) {
    require({"exp_avg", "exp_avg_sq", "step"});
    set_adam_state<torch::optim::AdamWParamState>(optimizer, p, state);
  } else if (dynamic_cast<torch::optim::Adam*>(&optimizer)) {
    require({"exp_avg", "exp_avg_sq", "step"});
    set_adam_state<torch::optim::AdamParamState>(optimizer, p, state);
  } else if (dynamic_cast<torch::optim::SGD*>(&optimizer)) {
    require({"momentum_buffer"});
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(state.at("momentum_buffer").to(p.options()));
    optimizer.state()[p.unsafeGetTensorImpl()] = std::move(s);
  }
}

}  // namespace trainyard
