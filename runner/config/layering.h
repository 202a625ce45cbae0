// Layering: experiment files (with `extends:`), `--set` overrides and the merge of one layer over
// another, into one flat ConfigTree. Internal to runner/config: load_experiment() is the face.
#pragma once

#include <map>
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

// Options of a config that a layer carried over when it named another component for their
// section: each key ("train.optimizer.lr") with the component it was written for ("adam").
using CarriedOptions = std::map<std::string, std::string>;

// A config as its layers made it, and the options in it that were carried over.
struct LayeredConfig {
  ConfigTree tree;
  CarriedOptions carried{};
};

// Sets every entry of `over` on `base`. A layer that names a different component for a section and
// nothing else there (`train.optimizer.name: adamw`, or `train.optimizer: adamw`) keeps the
// options earlier layers set there, marked carried: resolution keeps those the new component
// declares and drops the others with a note (resolve_run), as Lightning's CLI keeps the init_args
// a new class_path accepts — adam → adamw keeps the file's lr. A layer that names it with options
// of its own (`train.optimizer: {name: adamw, lr: 3e-3}`) writes the section afresh: it replaces
// the old one whole, as a Hydra config group does.
void merge_layer(LayeredConfig& base, const LayeredConfig& over);
void merge_layer(LayeredConfig& base, const ConfigTree& over);

// Reads `file` and, recursively, the files it extends (parents first, the file's own keys win).
// Problems go to `diagnostics`; the returned config holds what could be read.
LayeredConfig read_experiment_file(const std::string& file, Diagnostics& diagnostics);

// "train.epochs=1" set on `tree`, its origin the override itself.
void apply_override(const std::string& text, ConfigTree& tree, Diagnostics& diagnostics);

Origin file_origin(const std::string& file);

}  // namespace trainyard
