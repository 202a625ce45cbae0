#include "runner/config/option_defaults.h"

#include <map>

namespace trainyard {

OptionDefault registry_option_defaults(const Registry& registry) {
  return [&registry](const std::string& section, const std::string& name,
                     const std::string& option) -> std::optional<std::string> {
    static const std::map<std::string, ComponentKind> kinds = {
        {"model", ComponentKind::model},
        {"dataset", ComponentKind::dataset},
        {"train.optimizer", ComponentKind::optimizer},
        {"train.scheduler", ComponentKind::scheduler},
        {"runtime.strategy", ComponentKind::strategy}};
    const auto kind = kinds.find(section);
    if (kind == kinds.end()) return std::nullopt;
    const ComponentEntry* entry = registry.find(kind->second, name);
    if (!entry) return std::nullopt;
    for (const OptionInfo& info : entry->options)
      if (info.key == option && info.rule != "required") return info.default_value;
    return std::nullopt;
  };
}

}  // namespace trainyard
