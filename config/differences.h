// How one resolved configuration differs from another, key by key (both flat_config maps): what
// the dry run prints under each variant and the report's "differs from the baseline in" column.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace trainyard {

struct ConfigDifference {
  std::string key;
  // The value on each side; empty and `has_*` false where that side lacks the key.
  std::string mine, base;
  bool has_mine = true, has_base = true;
};

// The default of `option` of the component `name` configured at `section` ("runtime.strategy",
// "ddp", "bucket_mb"), as flat_config writes values; nullopt when unknown.
using OptionDefault = std::function<std::optional<std::string>(
    const std::string& section, const std::string& name, const std::string& option)>;

// The keys whose values differ, and those only one side has, with the settings derived from them
// that a user reasons with ("derived.global_batch": devices × batch × grad_accum;
// "derived.optimizer_steps_per_epoch" where the dataset says its train_size;
// "derived.weights_dtype" and "derived.compute_dtype" from runtime.precision). A value that is a
// default differs as any other. Under a component the two name differently (runtime.strategy.name:
// ddp against single) an option that only the new component has is left out at its default — the
// name says that difference — when `option_default` knows the default; otherwise it is shown.
// Sorted by key.
std::vector<ConfigDifference> config_differences(const std::map<std::string, std::string>& mine,
                                                 const std::map<std::string, std::string>& base,
                                                 const OptionDefault& option_default = {});

}  // namespace trainyard
