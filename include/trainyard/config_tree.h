// A config as a flat, ordered map from dotted keys ("train.optimizer.lr") to leaf values, each with
// its origin. Flat keys make the layering rules trivial — defaults < extends < file < sweep
// variant < --set is just "later set() wins" — and every value keeps the file:line:column it came
// from.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "trainyard/diagnostics.h"

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

// A leaf: a YAML scalar, a sequence, or null (an empty value).
//
// Careful: assigning one YAML::Node to another that is already bound writes *through* the handle
// into the document it came from. ConfigValue's assignments rebind the handle instead (reset), so
// moving entries around a vector never rewrites another entry's value.
struct ConfigValue {
  YAML::Node node;
  Origin origin;      // where the value is written
  Origin key_origin;  // where its key is written (for "unknown key" messages)

  ConfigValue() = default;
  ConfigValue(YAML::Node node, Origin origin, Origin key_origin)
      : node(std::move(node)), origin(std::move(origin)), key_origin(std::move(key_origin)) {}
  ConfigValue(const ConfigValue&) = default;
  ConfigValue& operator=(const ConfigValue& other) {
    node.reset(other.node);
    origin = other.origin;
    key_origin = other.key_origin;
    return *this;
  }
};

class ConfigTree {
 public:
  // Sets one dotted key, replacing whatever was there: a leaf at the key, keys below it, and a
  // leaf at any parent (setting "model.depth" replaces a shorthand "model: vit").
  void set(const std::string& key, ConfigValue value);
  void erase(const std::string& key);  // the key and everything below it

  const ConfigValue* find(std::string_view key) const;  // (linear: a tree is read a key at a time)
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<std::string, ConfigValue>>& entries() const { return entries_; }

  // The keys below "prefix." with that prefix removed, in order.
  ConfigTree subtree(std::string_view prefix) const;

  // Every entry of `over`, set on top of this tree.
  void merge(const ConfigTree& over);

  // Where a key that holds a mapping is written ("trian:" above "trian.epochs: 3"), so a
  // misspelt section is reported at its own line rather than its first child's. Recorded by
  // flatten_into; falls back to the leaf's own key when none was recorded from the leaf's file.
  void set_mapping_origin(const std::string& key, const Origin& origin);
  Origin key_origin(const std::string& key, const ConfigValue& leaf) const;

  // Nested YAML, in key order: what is stored with a run and printed by --dry-run.
  YAML::Node to_yaml() const;
  std::string to_yaml_text() const;

 private:
  // True when `key`, a key below it or a key above it is set: what set() must replace. Found in
  // `keys_`, so flattening a large file is not quadratic.
  bool overlaps(const std::string& key) const;

  std::vector<std::pair<std::string, ConfigValue>> entries_;  // in the order they were set
  std::set<std::string> keys_;                                // the same keys, sorted
  std::map<std::string, Origin> mapping_origins_;             // keys that hold mappings
};

// Flattens a YAML mapping read from `file` (maps recurse; scalars, sequences and nulls are
// leaves). Keys may themselves be dotted: "train.epochs: 3" equals "train: {epochs: 3}". YAML
// merge keys (`<<: *defaults`, `<<: [*a, *b]`) bring in their maps' keys; the map's own win.
void flatten_into(ConfigTree& tree, const YAML::Node& map, const std::string& file,
                  const std::string& prefix = "");

Origin origin_of(const YAML::Node& node, const std::string& file);

// A key written twice in one YAML mapping (anywhere in `node`, read from `file`) is an error: YAML
// forbids it and yaml-cpp would silently keep the later one.
void report_duplicate_keys(const YAML::Node& node, const std::string& file,
                           Diagnostics& diagnostics);

// True when `key` is `prefix` or lies below it ("train" covers "train.epochs").
bool key_is_under(std::string_view key, std::string_view prefix);

}  // namespace trainyard
#pragma GCC visibility pop
