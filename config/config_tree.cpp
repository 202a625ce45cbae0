#include "trainyard/config_tree.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "common/text.h"

namespace trainyard {

bool key_is_under(std::string_view key, std::string_view prefix) {
  if (prefix.empty()) return true;
  return key == prefix || (key.size() > prefix.size() && key.substr(0, prefix.size()) == prefix &&
                           key[prefix.size()] == '.');
}

namespace {

// The maps a YAML merge key brings in, in the order they are written (`<<: [*a, *b]`: a's keys win
// over b's), or none when this entry is not a merge key of mappings. yaml-cpp reads a plain `<<`
// as an ordinary key; only a quoted "<<" is meant as one.
std::vector<YAML::Node> merged_maps(const YAML::Node& key, const YAML::Node& value) {
  if (!key.IsScalar() || key.Scalar() != "<<" || key.Tag() != "?") return {};
  std::vector<YAML::Node> sources;
  if (value.IsSequence())
    for (const YAML::Node& item : value) sources.push_back(item);
  else
    sources.push_back(value);
  if (!std::all_of(sources.begin(), sources.end(), [](const YAML::Node& s) { return s.IsMap(); }))
    return {};
  return sources;  // (not reordered in place: assigning a YAML::Node writes into the node it refers
                   // to)
}

// The dotted keys an entry's value writes under `path` (what flatten_into makes of it), each with
// where its last key is written (`at`); merge keys aside: a mapping's own keys override what it
// merges in, on purpose.
void dotted_keys(const YAML::Node& value, const std::string& path, const Origin& at,
                 const std::string& file, std::vector<std::pair<std::string, Origin>>& out) {
  if (!value.IsMap() || value.size() == 0) {
    out.emplace_back(path, at);
    return;
  }
  for (auto it = value.begin(); it != value.end(); ++it)
    if (it->first.IsScalar() && merged_maps(it->first, it->second).empty())
      dotted_keys(it->second, path + "." + it->first.Scalar(), origin_of(it->first, file), file,
                  out);
}

const std::string& key_of(const std::string& key) { return key; }
template <class Value>
const std::string& key_of(const std::pair<const std::string, Value>& entry) {
  return entry.first;
}

// The first of the sorted dotted keys `keys` (a set, or a map by key) that `key` would overwrite
// or be overwritten by — the same key, one above it or one below it — or keys.end(). In
// O(depth log n).
template <class SortedKeys>
typename SortedKeys::const_iterator overlapping(const SortedKeys& keys, const std::string& key) {
  if (auto it = keys.find(key); it != keys.end()) return it;
  for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1))
    if (auto it = keys.find(key.substr(0, dot)); it != keys.end()) return it;  // above
  if (auto it = keys.lower_bound(key + "."); it != keys.end() && key_is_under(key_of(*it), key))
    return it;  // below
  return keys.end();
}

}  // namespace

void report_duplicate_keys(const YAML::Node& node, const std::string& file,
                           Diagnostics& diagnostics) {
  if (node.IsSequence()) {
    for (const auto& item : node) report_duplicate_keys(item, file, diagnostics);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, Origin> seen;
  // The same key written two ways, "train: {epochs: 3}" and "train.epochs: 2": one would silently
  // win over the other. Only entries whose keys begin alike can overlap: grouped by the first
  // segment, so a file with no dotted keys costs nothing more.
  std::map<std::string, std::vector<std::pair<YAML::Node, YAML::Node>>> by_head;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) continue;
    const Origin origin = origin_of(key, file);
    auto [first, inserted] = seen.emplace(key.Scalar(), origin);
    if (!inserted)
      diagnostics.error(origin, "key '" + key.Scalar() +
                                    "' is given twice in this mapping (first at " +
                                    to_string(first->second) + "); keep one");
    else if (merged_maps(key, it->second).empty())
      by_head[key.Scalar().substr(0, key.Scalar().find('.'))].emplace_back(key, it->second);
  }
  for (const auto& [head, entries] : by_head) {
    if (entries.size() < 2) continue;
    std::map<std::string, Origin> written;  // dotted key -> where its last key is written
    for (const auto& [key, value] : entries) {
      std::vector<std::pair<std::string, Origin>> keys;
      dotted_keys(value, key.Scalar(), origin_of(key, file), file, keys);
      for (const auto& [k, at] : keys)
        if (auto other = overlapping(written, k); other != written.end()) {
          diagnostics.error(at, fmt::format("'{}' is also written as '{}' at {}, in the same "
                                            "mapping; keep one",
                                            k, other->first, to_string(other->second)));
          break;  // one message an entry
        }
      for (const auto& [k, at] : keys) written.emplace(k, at);
    }
  }
  for (auto it = node.begin(); it != node.end(); ++it)
    report_duplicate_keys(it->second, file, diagnostics);
}

Origin origin_of(const YAML::Node& node, const std::string& file) {
  YAML::Mark mark = node.Mark();
  if (mark.is_null()) return {file, 0, 0};
  return {file, mark.line + 1, mark.column + 1};
}

bool ConfigTree::overlaps(const std::string& key) const {
  return overlapping(keys_, key) != keys_.end();
}

void ConfigTree::erase(const std::string& key) {
  std::erase_if(entries_, [&](const auto& entry) { return key_is_under(entry.first, key); });
  std::erase_if(keys_, [&](const std::string& k) { return key_is_under(k, key); });
  std::erase_if(mapping_origins_,
                [&](const auto& entry) { return key_is_under(entry.first, key); });
}

void ConfigTree::set(const std::string& key, ConfigValue value) {
  if (overlaps(key)) {  // rare: the scan only when something is replaced
    auto replaced = [&](const std::string& k) {
      return key_is_under(k, key) || key_is_under(key, k);
    };
    std::erase_if(entries_, [&](const auto& entry) { return replaced(entry.first); });
    std::erase_if(keys_, replaced);
  }
  entries_.emplace_back(key, std::move(value));
  keys_.insert(key);
}

const ConfigValue* ConfigTree::find(std::string_view key) const {
  for (const auto& [k, v] : entries_)
    if (k == key) return &v;
  return nullptr;
}

ConfigTree ConfigTree::subtree(std::string_view prefix) const {
  ConfigTree out;
  for (const auto& [k, v] : entries_) {
    if (k.size() > prefix.size() && key_is_under(k, prefix))
      out.set(k.substr(prefix.size() + 1), v);
  }
  for (const auto& [k, origin] : mapping_origins_)
    if (k.size() > prefix.size() && key_is_under(k, prefix))
      out.mapping_origins_[k.substr(prefix.size() + 1)] = origin;
  return out;
}

void ConfigTree::merge(const ConfigTree& over) {
  for (const auto& [k, v] : over.entries_) set(k, v);
  for (const auto& [k, origin] : over.mapping_origins_) mapping_origins_[k] = origin;
}

void ConfigTree::set_mapping_origin(const std::string& key, const Origin& origin) {
  mapping_origins_[key] = origin;
}

Origin ConfigTree::key_origin(const std::string& key, const ConfigValue& leaf) const {
  auto it = mapping_origins_.find(key);
  // Another file's mapping of that name (an `extends` layer) is not where this leaf is written.
  if (it == mapping_origins_.end() || it->second.file != leaf.key_origin.file)
    return leaf.key_origin;
  return it->second;
}

YAML::Node ConfigTree::to_yaml() const {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& [key, value] : entries_) {
    std::vector<std::string> parts = split(key, '.');
    // yaml-cpp's operator[] hands out references into the tree, so walk with Node handles.
    YAML::Node node = root;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      YAML::Node child = node[parts[i]];
      if (!child.IsMap()) child = YAML::Node(YAML::NodeType::Map);
      node[parts[i]] = child;
      node.reset(child);
    }
    node[parts.back()] = YAML::Clone(value.node);
  }
  return root;
}

std::string ConfigTree::to_yaml_text() const {
  YAML::Emitter out;
  out << to_yaml();
  return std::string(out.c_str()) + "\n";
}

void flatten_into(ConfigTree& tree, const YAML::Node& map, const std::string& file,
                  const std::string& prefix) {
  // Merge keys first (`<<: *defaults`, as YAML 1.1 defines them), so the map's own keys, set
  // after them, win. A merge of anything but mappings stays a key named '<<': validation reports
  // it.
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::vector<YAML::Node> sources = merged_maps(it->first, it->second);
    for (auto source = sources.rbegin(); source != sources.rend(); ++source)
      flatten_into(tree, *source, file, prefix);
  }
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!merged_maps(it->first, it->second).empty()) continue;
    std::string key = it->first.Scalar();
    std::string full = prefix.empty() ? key : prefix + "." + key;
    const YAML::Node value = it->second;  // a copy: `it->` yields a temporary proxy
    if (value.IsMap() && value.size() > 0) {
      tree.set_mapping_origin(full, origin_of(it->first, file));
      flatten_into(tree, value, file, full);
    } else {
      // An empty value or an empty map is recorded as null, at the key's own position.
      YAML::Node leaf = value.IsMap() ? YAML::Node() : value;
      Origin origin = origin_of(value.IsNull() || value.IsMap() ? it->first : value, file);
      tree.set(full, {leaf, origin, origin_of(it->first, file)});
    }
  }
}

}  // namespace trainyard
