#include "runner/config/layering.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/text.h"

namespace trainyard {

namespace fs = std::filesystem;

Origin file_origin(const std::string& file) { return {file, 0, 0}; }

void expand_component_shorthand(ConfigTree& tree) {
  for (const auto& section : kComponentSections) {
    const ConfigValue* value = tree.find(section.path);
    if (value && value->node.IsScalar()) {
      ConfigValue copy = *value;
      tree.set(std::string(section.path) + ".name", copy);
    }
  }
}

void merge_layer(ConfigTree& base, const ConfigTree& over) {
  for (const auto& section : kComponentSections) {
    std::string name_key = std::string(section.path) + ".name";
    const ConfigValue* new_name = over.find(name_key);
    const ConfigValue* old_name = base.find(name_key);
    if (new_name && old_name && new_name->node.IsScalar() && old_name->node.IsScalar() &&
        new_name->node.Scalar() != old_name->node.Scalar())
      base.erase(section.path);
  }
  base.merge(over);
}

namespace {

// read_experiment_file() for one file of the chain: `chain` holds the files being read, to catch
// cycles.
ConfigTree read_config_file(const std::string& file, const Origin& referenced_at,
                            std::vector<std::string>& chain, Diagnostics& diagnostics) {
  ConfigTree tree;
  std::error_code ec;
  fs::path path(file);
  if (!fs::exists(path, ec)) {
    diagnostics.error(referenced_at, fmt::format("cannot read '{}': no such file", file));
    return tree;
  }
  std::ifstream in(file);
  if (!in || fs::is_directory(path, ec)) {
    diagnostics.error(referenced_at, fmt::format("cannot read '{}': not a readable file", file));
    return tree;
  }
  std::string canonical = fs::weakly_canonical(path, ec).string();
  for (const auto& seen : chain) {
    if (seen == canonical) {
      diagnostics.error(referenced_at, fmt::format("'extends' forms a cycle: {} -> {}",
                                                   join(chain, " -> "), file));
      return tree;
    }
  }
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::ParserException& e) {
    diagnostics.error({file, e.mark.line + 1, e.mark.column + 1}, "YAML syntax error: " + e.msg);
    return tree;
  }
  if (root.IsNull()) return tree;  // an empty file is an empty config
  report_duplicate_keys(root, file, diagnostics);
  if (!root.IsMap()) {
    diagnostics.error(origin_of(root, file),
                      "an experiment file must be a mapping of sections (model, dataset, ...)");
    return tree;
  }
  chain.push_back(canonical);
  if (const YAML::Node extends = root["extends"]) {
    std::vector<YAML::Node> parents;
    if (extends.IsScalar())
      parents.push_back(extends);
    else if (extends.IsSequence())
      for (const auto& item : extends) parents.push_back(item);
    else
      diagnostics.error(origin_of(extends, file),
                        "'extends' must be a file name or a list of them");
    for (const auto& parent : parents) {
      if (!parent.IsScalar()) {
        diagnostics.error(origin_of(parent, file), "'extends' entries must be file names");
        continue;
      }
      fs::path parent_path = fs::path(parent.Scalar());
      if (parent_path.is_relative()) parent_path = path.parent_path() / parent_path;
      merge_layer(tree, read_config_file(parent_path.lexically_normal().string(),
                                         origin_of(parent, file), chain, diagnostics));
    }
  }
  chain.pop_back();
  ConfigTree own;
  flatten_into(own, root, file);
  own.erase("extends");
  expand_component_shorthand(own);
  tree.erase("name");  // a name belongs to one file; a child without one takes its own file's
  merge_layer(tree, own);
  return tree;
}

}  // namespace

ConfigTree read_experiment_file(const std::string& file, Diagnostics& diagnostics) {
  std::vector<std::string> chain;
  return read_config_file(file, file_origin(file), chain, diagnostics);
}

void apply_override(const std::string& text, ConfigTree& tree, Diagnostics& diagnostics) {
  Origin origin{"--set " + text, 0, 0};
  size_t equals = text.find('=');
  if (equals == std::string::npos || trim(text.substr(0, equals)).empty()) {
    diagnostics.error(origin, "an override must look like key=value, e.g. --set train.epochs=1");
    return;
  }
  const std::string key = trim(text.substr(0, equals));  // --set "train.epochs = 2" works too
  if (key_is_under(key, "sweep") || key == "extends") {
    diagnostics.error(
        origin, fmt::format("'{}' cannot be overridden from the command line; edit the file", key));
    return;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(equals + 1));
  } catch (const YAML::ParserException& e) {
    diagnostics.error(origin, "value is not valid YAML: " + e.msg);
    return;
  }
  ConfigTree one;
  if (value.IsMap()) {
    flatten_into(one, value, origin.file, key);
    for (const auto& [k, v] : one.entries()) tree.set(k, {v.node, origin, origin});
  } else {
    one.set(key, {value, origin, origin});
    expand_component_shorthand(one);
    tree.merge(one);
  }
}

}  // namespace trainyard
