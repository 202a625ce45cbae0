#include "config/differences.h"

namespace trainyard {

namespace {

using FlatConfig = std::map<std::string, std::string>;

// Whether `key` lies under a component ("runtime.strategy" for "runtime.strategy.bucket_mb") whose
// `name` the two configurations give differently, at any depth.
bool under_renamed_component(const std::string& key, const FlatConfig& mine,
                             const FlatConfig& base) {
  for (auto dot = key.rfind('.'); dot != std::string::npos && dot > 0;
       dot = key.rfind('.', dot - 1)) {
    const std::string name_key = key.substr(0, dot) + ".name";
    if (name_key == key) continue;
    const auto a = mine.find(name_key), b = base.find(name_key);
    if (a != mine.end() && b != base.end() && a->second != b->second) return true;
  }
  return false;
}

}  // namespace

std::vector<ConfigDifference> config_differences(const FlatConfig& mine, const FlatConfig& base) {
  std::map<std::string, ConfigDifference> found;  // sorted by key
  for (const auto& [key, value] : mine) {
    const auto it = base.find(key);
    if (it != base.end() && it->second == value) continue;
    if (it == base.end() && under_renamed_component(key, mine, base)) continue;
    found[key] = it == base.end() ? ConfigDifference{key, value, "", true, false}
                                  : ConfigDifference{key, value, it->second, true, true};
  }
  for (const auto& [key, value] : base)
    if (!mine.count(key) && !under_renamed_component(key, mine, base))
      found[key] = ConfigDifference{key, "", value, false, true};
  std::vector<ConfigDifference> out;
  for (auto& [key, difference] : found) out.push_back(std::move(difference));
  return out;
}

}  // namespace trainyard
