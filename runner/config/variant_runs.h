// From a sweep's variants to what an experiment runs (experiment.cpp reads a file through these):
// each variant's runs resolved with the plugins the experiment names, or its study made and checked
// at the edges of its space, and the problems found said once for the variants they concern.
// Internal to runner/config.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "components/plugin_loader.h"
#include "runner/config/experiment.h"
#include "runner/config/layering.h"
#include "runner/config/search_space.h"
#include "runner/config/sweep.h"
#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"
#include "trainyard/registry.h"

namespace trainyard {

// The problems found resolving each variant, with the variants each was found in. One of every
// variant, or one written in a variant's own `set`, is said as it is, once: its place says where
// it is. One of only some variants at a shared place (the base sections, --set) says which, or
// "--set train.optimizer.beta9=1" would be reported twice without a word of why (once for the
// variants on adam, once for those on adamw).
class VariantProblems {
 public:
  // The problems `found` resolving `variant`.
  void add(const Diagnostics& found, const Variant& variant);
  // Each problem into `diagnostics` once, naming the variants when only some of the
  // `variant_count` have it at a shared place.
  void report(size_t variant_count, Diagnostics& diagnostics) const;

 private:
  struct Problem {
    Origin origin;
    std::string message;
    std::vector<std::string> variants{};
    bool in_own_set = false;  // written in a variant's `set`: its place names the variant
  };

  // Whether `at` is a line of `overrides` (a variant's own `set`).
  static bool written_in(const ConfigTree& overrides, const Origin& at);

  std::vector<Problem> problems_;
};

// --- the experiment's plugins ---

// The plugins an experiment names: the command line's (--plugin), then its `plugins:` list, each
// loaded into `loader`. A path written in a file is relative to that file, as `extends:` is; one
// given with --set, to the current folder. Without a loader, naming one is an error.
std::vector<PluginRef> load_named_plugins(const ConfigTree& tree, PluginLoader* loader,
                                          Diagnostics& diagnostics);
// `resolved` with its plugins first, as a run's resolved config records them: each library's
// absolute path and the SHA-256 of its bytes, so a rebuilt plugin is another configuration. A run
// without plugins records nothing (its identity is what it was before plugins existed).
ConfigTree with_plugins(const std::vector<PluginRef>& plugins, const ConfigTree& resolved,
                        const Origin& origin);
// The plugins a resolved config records, loaded into `loader`, each checked to be the bytes the
// run was configured with.
std::vector<PluginRef> load_recorded_plugins(const ConfigTree& tree, PluginLoader* loader);

// --- a variant's runs, or its study ---

// The entry of `layer` that sets the searched `parameter`'s key — or a key inside it when a choice
// is a mapping, which writes the section afresh (a variant's train.optimizer.lr would be lost);
// a choice of names alone keeps what the new component declares. nullptr when none does.
const ConfigValue* searched_key_set_by(const ConfigTree& layer, const SearchParameter& parameter);
// One run of a variant: `run_config` (the file's layers, the variant's set, the command line)
// resolved against `registry`, trained with `seed` when given (a repeat's, a confirmation's). What
// is wrong goes to `found`; notes to `notes`, each once.
RunSpec resolve_variant_run(const LayeredConfig& run_config, const std::string& variant,
                            int64_t repeat, std::optional<int64_t> seed, const Registry& registry,
                            const std::vector<PluginRef>& plugins, const std::string& file,
                            Diagnostics& found, std::vector<std::string>& notes_out);
// A variant's study: what resolves its trials and confirmations (the variant's layers with the
// trial's values on top, below the command line), checked now by resolving the variant at every
// edge of the space — each range's ends, every choice — so that a value the space can propose
// and the run's rules refuse is reported at the parameter, before anything runs.
Study make_study(const Variant& variant, const LayeredConfig& run_config,
                 const SearchSettings& search, const Registry& registry,
                 const std::vector<PluginRef>& plugins, const std::string& file,
                 Experiment& experiment, VariantProblems& problems);

}  // namespace trainyard
