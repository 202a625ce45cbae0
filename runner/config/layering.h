// Layering: experiment files (with `extends:`), `--set` overrides and the merge of one layer over
// another, into one flat ConfigTree. Internal to runner/config: load_experiment() is the face.
#pragma once

#include <string>
#include <vector>

#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"
#include "trainyard/registry.h"

namespace trainyard {

// The sections of an experiment that name a component: the path of the section, its kind, and the
// name used when absent. A run's ComponentChoice fields follow this order.
struct ComponentSection {
  const char* path;
  ComponentKind kind;
  const char* default_name;           // nullptr: required
  std::vector<std::string> reserved;  // keys of the section that are not the component's own
};
inline const ComponentSection kComponentSections[] = {
    {"model", ComponentKind::model, nullptr, {"weights", "strict"}},
    {"dataset", ComponentKind::dataset, nullptr, {}},
    {"train.optimizer", ComponentKind::optimizer, "adam", {}},
    {"train.scheduler", ComponentKind::scheduler, "none", {}},
    {"runtime.strategy", ComponentKind::strategy, "single", {}},
};

// `model: vit` is shorthand for `model: {name: vit}`.
void expand_component_shorthand(ConfigTree& tree);

// Sets every entry of `over` on `base`. A layer that names a different component for a section
// replaces that section whole, as a Hydra config group does: the old component's options would
// be unknown keys for the new one.
void merge_layer(ConfigTree& base, const ConfigTree& over);

// Reads `file` and, recursively, the files it extends (parents first, the file's own keys win).
// Problems go to `diagnostics`; the returned tree holds what could be read.
ConfigTree read_experiment_file(const std::string& file, Diagnostics& diagnostics);

// "train.epochs=1" set on `tree`, its origin the override itself.
void apply_override(const std::string& text, ConfigTree& tree, Diagnostics& diagnostics);

Origin file_origin(const std::string& file);

}  // namespace trainyard
