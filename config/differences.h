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
  // The component whose declared default a side's value is, where only that side's component has
  // the option ("adam" for train.optimizer.eps after sgd → adam); "" otherwise.
  std::string mine_default_of{}, base_default_of{};
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
// ddp against single) the options only one of them has are differences too — the new one's
// defaults now apply, the old one's options are gone — each marked as its component's default
// where `option_default` knows it is one. Sorted by key.
std::vector<ConfigDifference> config_differences(const std::map<std::string, std::string>& mine,
                                                 const std::map<std::string, std::string>& base,
                                                 const OptionDefault& option_default = {});

// One difference as the dry run and the report's "differs from the baseline" column both show it:
// "train.optimizer.eps: 1e-08, adam's default (baseline: not set)", "train.optimizer.momentum: not
// set (baseline: 0.9)".
std::string describe_difference(const ConfigDifference& difference);

}  // namespace trainyard
