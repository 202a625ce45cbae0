// Optimizers by name: adam, adamw, sgd — LibTorch's implementations with their options declared
// once here.
#pragma once

#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "components/registry.h"
#include "runner/config/experiment.h"

namespace trainyard {

using OptimizerPtr = std::unique_ptr<torch::optim::Optimizer>;
using Parameters = std::vector<torch::Tensor>;

inline OptimizerPtr build_optimizer(const Registry& registry, const ComponentChoice& choice,
                                    const Parameters& parameters) {
  return registry.build<OptimizerPtr(const Parameters&)>(ComponentKind::optimizer, choice.name,
                                                        choice.options, parameters);
}

void register_optimizers(Registry& registry);

// The learning rate every parameter group is set to (schedulers scale it per step).
double base_learning_rate(const ConfigTree& optimizer_options);

}  // namespace trainyard
