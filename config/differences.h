// How one resolved configuration differs from another, key by key (both flat_config maps): what
// the dry run prints under each variant and the report's "differs from the baseline in" column.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace trainyard {

struct ConfigDifference {
  std::string key;
  // The value on each side; empty and `has_*` false where that side lacks the key.
  std::string mine, base;
  bool has_mine = true, has_base = true;
};

// The keys whose values differ, and those only one side has — except, under a component the two
// name differently (runtime.strategy.name: ddp against single), the options only one side has:
// the component's name says that difference, and the options are the other component's own
// (mostly its defaults: backend, bucket_mb, ...). Sorted by key.
std::vector<ConfigDifference> config_differences(const std::map<std::string, std::string>& mine,
                                                 const std::map<std::string, std::string>& base);

}  // namespace trainyard
