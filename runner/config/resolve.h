// Resolution: one run's merged ConfigTree checked against the registry and turned into a RunSpec —
// every component with all its options and capabilities, the train and runtime settings — and the
// rules that span components (cuda-graphs needs a one-process strategy and an optimizer that steps
// on the device, ...). Internal to runner/config.
#pragma once

#include <string>

#include "runner/config/layering.h"
#include "runner/config/run_spec.h"
#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"
#include "trainyard/registry.h"

namespace trainyard {

// Validates `tree` (one run's layers merged) and fills `run`. Returns the resolved config: every
// option of every section, defaults included. Problems go to `diagnostics`; `file` is the origin of
// settings nobody wrote. The `carried` options (merge_layer) that their new component does not
// declare are dropped, each with a line in `notes`.
ConfigTree resolve_run(const ConfigTree& tree, const Registry& registry, const std::string& file,
                       RunSpec& run, Diagnostics& diagnostics,
                       std::vector<std::string>* notes = nullptr,
                       const CarriedOptions* carried = nullptr);

}  // namespace trainyard
