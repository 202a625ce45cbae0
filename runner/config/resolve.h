// Resolution: one run's merged ConfigTree checked against the registry and turned into a RunSpec —
// every component with all its options and capabilities, the train and runtime settings — and the
// rules that span components (cuda-graphs needs a one-process strategy and an optimizer that steps
// on the device, ...). Internal to runner/config.
#pragma once

#include <string>

#include "runner/config/run_spec.h"
#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"
#include "trainyard/registry.h"

namespace trainyard {

// Validates `tree` (one run's layers merged) and fills `run`. Returns the resolved config: every
// option of every section, defaults included. Problems go to `diagnostics`; `file` is the origin of
// settings nobody wrote.
ConfigTree resolve_run(const ConfigTree& tree, const Registry& registry, const std::string& file,
                       RunSpec& run, Diagnostics& diagnostics);

}  // namespace trainyard
