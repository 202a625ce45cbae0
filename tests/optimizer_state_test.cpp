// Every registered optimizer's state survives a checkpoint bit for bit: walked from the registry,
// so an optimizer added without a faithful parameter_state/set_parameter_state fails here instead
// of continuing a user's interrupted run as a different one.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include "components/builtin.h"
#include "trainyard/config_tree.h"
#include "trainyard/optimizers.h"

namespace trainyard {
namespace {

// Options beyond the defaults worth a round trip of their own (other state, another code path).
const std::vector<std::pair<std::string, std::string>> kExtraOptions = {
    {"adam", "{fused: false}"},
    {"adamw", "{fused: false}"},
    {"sgd", "{momentum: 0.9}"},
    {"sgd", "{momentum: 0.9, nesterov: true, weight_decay: 0.01}"},
};

ComponentChoice optimizer_choice(const std::string& name, const std::string& yaml) {
  const ComponentEntry* entry = builtin_registry().find(ComponentKind::optimizer, name);
  ConfigTree section;
  flatten_into(section, YAML::Load(yaml), "test.yaml");
  Diagnostics diagnostics;
  ComponentChoice choice{
      .name = name, .options = entry->resolve(section, "train.optimizer", {}, {}, diagnostics)};
  diagnostics.throw_if_any();
  return choice;
}

Parameters fresh_parameters() {
  return {torch::linspace(-1, 1, 12).reshape({3, 4}).requires_grad_(),
          torch::linspace(0.5, 2, 5).requires_grad_()};
}

Parameters copies(const Parameters& parameters) {
  Parameters out;
  for (const auto& p : parameters) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

// `steps` steps with gradients drawn from `generator`, the same for every optimizer given it.
void train(Optimizer& optimizer, const Parameters& parameters, int steps,
           torch::Generator& generator) {
  for (int i = 0; i < steps; ++i) {
    for (const auto& p : parameters)
      const_cast<torch::Tensor&>(p).mutable_grad() = torch::randn(p.sizes(), generator);
    optimizer.libtorch().step();
  }
}

void expect_equal_states(const ParameterState& expected, const ParameterState& actual,
                         const std::string& where) {
  ASSERT_EQ(expected.size(), actual.size()) << where;
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(actual.count(name)) << where << ": no '" << name << "'";
    EXPECT_TRUE(torch::equal(tensor, actual.at(name))) << where << ": '" << name << "' differs";
  }
}

void expect_round_trip(const std::string& name, const std::string& yaml) {
  const std::string where = name + " " + yaml;
  const ComponentChoice choice = optimizer_choice(name, yaml);
  Parameters first = fresh_parameters();
  OptimizerPtr original = build_optimizer(builtin_registry(), choice, first);
  torch::Generator generator = at::detail::createCPUGenerator(7);
  train(*original, first, 3, generator);

  // A state that exists is said: an optimizer holding bytes but reporting nothing would be
  // checkpointed empty.
  // Copies, as a checkpoint's file holds: the live tensors go on changing with the original.
  std::vector<ParameterState> states;
  for (const auto& p : first) {
    ParameterState copy;
    for (const auto& [key, tensor] : original->parameter_state(p)) copy[key] = tensor.clone();
    states.push_back(copy);
  }
  if (original->state_bytes() > 0) {
    for (const auto& state : states) EXPECT_FALSE(state.empty()) << where;
  }

  // Continued in a new optimizer (as a resumed run does) over copies of the weights.
  Parameters second = copies(first);
  OptimizerPtr resumed = build_optimizer(builtin_registry(), choice, second);
  for (size_t i = 0; i < second.size(); ++i) resumed->set_parameter_state(second[i], states[i]);
  for (size_t i = 0; i < second.size(); ++i)
    expect_equal_states(states[i], resumed->parameter_state(second[i]), where);
  EXPECT_EQ(original->state_bytes(), resumed->state_bytes()) << where;

  torch::Generator a = at::detail::createCPUGenerator(11), b = at::detail::createCPUGenerator(11);
  train(*original, first, 4, a);
  train(*resumed, second, 4, b);
  for (size_t i = 0; i < first.size(); ++i)
    EXPECT_TRUE(torch::equal(first[i], second[i])) << where << ": parameter " << i << " differs";
  for (size_t i = 0; i < first.size(); ++i)
    expect_equal_states(original->parameter_state(first[i]), resumed->parameter_state(second[i]),
                        where);
}

TEST(OptimizerStateTest, EveryRegisteredOptimizerRoundTripsItsStateBitForBit) {
  const auto names = builtin_registry().names(ComponentKind::optimizer);
  ASSERT_FALSE(names.empty());
  for (const auto& name : names) expect_round_trip(name, "{}");
  for (const auto& [name, yaml] : kExtraOptions) expect_round_trip(name, yaml);
}

// The check has teeth: without its state a continued optimizer goes another way.
TEST(OptimizerStateTest, AnOptimizerContinuedWithoutItsStateDiffers) {
  const ComponentChoice choice = optimizer_choice("adamw", "{}");
  Parameters first = fresh_parameters();
  OptimizerPtr original = build_optimizer(builtin_registry(), choice, first);
  torch::Generator generator = at::detail::createCPUGenerator(7);
  train(*original, first, 3, generator);
  Parameters second = copies(first);
  OptimizerPtr forgetful = build_optimizer(builtin_registry(), choice, second);
  torch::Generator a = at::detail::createCPUGenerator(11), b = at::detail::createCPUGenerator(11);
  train(*original, first, 2, a);
  train(*forgetful, second, 2, b);
  EXPECT_FALSE(torch::equal(first[0], second[0]));
}

TEST(OptimizerStateTest, AStateWithoutItsNamesIsRefused) {
  for (const auto& name : builtin_registry().names(ComponentKind::optimizer)) {
    const std::string yaml = name == "sgd" ? "{momentum: 0.9}" : "{}";
    Parameters parameters = fresh_parameters();
    OptimizerPtr optimizer =
        build_optimizer(builtin_registry(), optimizer_choice(name, yaml), parameters);
    EXPECT_THROW(optimizer->set_parameter_state(parameters[0], {{"unknown", torch::zeros({1})}}),
                 UserError)
        << name;
  }
}

}  // namespace
}  // namespace trainyard
