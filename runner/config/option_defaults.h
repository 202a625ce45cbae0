// The options' defaults config_differences marks as a swapped component's defaults, from the
// registry (built-in components and loaded plugins).
#pragma once

#include "config/differences.h"
#include "trainyard/registry.h"

namespace trainyard {

// The default of an option of the component a section names — model, dataset, train.optimizer,
// train.scheduler, runtime.strategy — as the registry declares it; nullopt for another section,
// a component the registry lacks, or an option without a default. `registry` must outlive it.
OptionDefault registry_option_defaults(const Registry& registry);

}  // namespace trainyard
