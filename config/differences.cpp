#include "config/differences.h"

namespace trainyard {

namespace {

using FlatConfig = std::map<std::string, std::string>;

// The section of the innermost component above `key` whose `name` the two configurations give
// differently ("runtime.strategy" for "runtime.strategy.bucket_mb" under ddp against single);
// empty when there is none.
std::string renamed_section(const std::string& key, const FlatConfig& mine,
                            const FlatConfig& base) {
  for (auto dot = key.rfind('.'); dot != std::string::npos && dot > 0;
       dot = key.rfind('.', dot - 1)) {
    const std::string section = key.substr(0, dot), name_key = section + ".name";
    if (name_key == key) continue;
    const auto a = mine.find(name_key), b = base.find(name_key);
    if (a != mine.end() && b != base.end() && a->second != b->second) return section;
  }
  return "";
}

// Whether `key` = `value` in `config` is its component's own default under a renamed component.
bool at_renamed_components_default(const std::string& key, const std::string& value,
                                   const FlatConfig& config, const FlatConfig& other,
                                   const OptionDefault& option_default) {
  if (!option_default) return false;
  const std::string section = renamed_section(key, config, other);
  if (section.empty()) return false;
  const auto value_default =
      option_default(section, config.at(section + ".name"), key.substr(section.size() + 1));
  return value_default && *value_default == value;
}

}  // namespace

std::vector<ConfigDifference> config_differences(const FlatConfig& mine, const FlatConfig& base,
                                                 const OptionDefault& option_default) {
  std::map<std::string, ConfigDifference> found;  // sorted by key
  for (const auto& [key, value] : mine) {
    const auto it = base.find(key);
    if (it != base.end() && it->second == value) continue;
    if (at_renamed_components_default(key, value, mine, base, option_default)) continue;
    found[key] = it == base.end() ? ConfigDifference{key, value, "", true, false}
                                  : ConfigDifference{key, value, it->second, true, true};
  }
  for (const auto& [key, value] : base)
    if (!mine.count(key) && !at_renamed_components_default(key, value, base, mine, option_default))
      found[key] = ConfigDifference{key, "", value, false, true};
  std::vector<ConfigDifference> out;
  for (auto& [key, difference] : found) out.push_back(std::move(difference));
  return out;
}

}  // namespace trainyard
