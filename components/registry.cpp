#include "trainyard/registry.h"

#include <stdexcept>

#include "common/text.h"

namespace trainyard {

const char* to_string(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::model:
      return "model";
    case ComponentKind::dataset:
      return "dataset";
    case ComponentKind::optimizer:
      return "optimizer";
    case ComponentKind::scheduler:
      return "scheduler";
    case ComponentKind::precision:
      return "precision";
    case ComponentKind::strategy:
      return "strategy";
  }
  return "?";
}

const std::vector<ComponentKind>& all_component_kinds() {
  static const std::vector<ComponentKind> kinds = {
      ComponentKind::model,     ComponentKind::dataset,   ComponentKind::optimizer,
      ComponentKind::scheduler, ComponentKind::precision, ComponentKind::strategy};
  return kinds;
}

AnyCapabilities default_capabilities(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::model:
      return ModelCapabilities{};
    case ComponentKind::dataset:
      return DatasetCapabilities{};
    case ComponentKind::optimizer:
      return OptimizerCapabilities{};
    case ComponentKind::scheduler:
      return SchedulerCapabilities{};
    case ComponentKind::precision:
      return PrecisionCapabilities{};
    case ComponentKind::strategy:
      return StrategyCapabilities{};
  }
  throw std::logic_error("a component kind without capabilities");
}

void Registry::insert(ComponentEntry entry) {
  if (find(entry.kind, entry.name))
    throw std::logic_error(std::string("duplicate ") + to_string(entry.kind) + " '" + entry.name +
                           "' in the registry");
  entries_.push_back(std::move(entry));
}

void Registry::adopt(Registry staged, const std::string& library) {
  for (auto& entry : staged.entries_) {
    entry.library = library;
    insert(std::move(entry));
  }
}

const ComponentEntry* Registry::find(ComponentKind kind, const std::string& name) const {
  for (const auto& entry : entries_)
    if (entry.kind == kind && entry.name == name) return &entry;
  return nullptr;
}

std::vector<const ComponentEntry*> Registry::entries(ComponentKind kind) const {
  std::vector<const ComponentEntry*> out;
  for (const auto& entry : entries_)
    if (entry.kind == kind) out.push_back(&entry);
  return out;
}

std::vector<std::string> Registry::names(ComponentKind kind) const {
  std::vector<std::string> out;
  for (const auto* entry : entries(kind)) out.push_back(entry->name);
  return out;
}

const ComponentEntry* lookup_component(const Registry& registry, ComponentKind kind,
                                       const std::string& name, const std::string& key,
                                       const Origin& origin, Diagnostics& diagnostics) {
  if (const ComponentEntry* entry = registry.find(kind, name)) return entry;
  std::vector<std::string> known = registry.names(kind);
  std::string message = "'" + key + "': unknown " + to_string(kind) + " '" + name + "'";
  std::string guess = closest_match(name, known);
  if (!guess.empty()) message += " (did you mean '" + guess + "'?)";
  diagnostics.error(origin, message + "; known: " + join(known));
  return nullptr;
}

}  // namespace trainyard
