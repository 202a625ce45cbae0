#include "runner/config/layering.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "common/files.h"
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

void merge_layer(LayeredConfig& base, const LayeredConfig& over) {
  for (const auto& section : kComponentSections) {
    std::string name_key = std::string(section.path) + ".name";
    const ConfigValue* new_name = over.tree.find(name_key);
    const ConfigValue* written_name = base.tree.find(name_key);
    if (!new_name || !new_name->node.IsScalar()) continue;
    // A section that names no component has its default's (adam for train.optimizer).
    std::string old_name;
    if (written_name && written_name->node.IsScalar())
      old_name = written_name->node.Scalar();
    else if (!written_name && section.default_name)
      old_name = section.default_name;
    if (old_name.empty() || new_name->node.Scalar() == old_name) continue;
    const std::string prefix = std::string(section.path) + ".";
    // Named with options of its own, the section is written afresh: it replaces the old one whole.
    const bool restated = std::any_of(
        over.tree.entries().begin(), over.tree.entries().end(),
        [&](const auto& e) { return e.first.starts_with(prefix) && e.first != name_key; });
    if (restated) {
      base.tree.erase(section.path);
      continue;
    }
    for (const auto& [key, value] : base.tree.entries())
      if (key.starts_with(prefix) && key != name_key)
        base.carried.emplace(key, old_name);  // an earlier mark stays: its origin
    // Back to the component they were written for, they are its own again.
    std::erase_if(base.carried, [&](const auto& mark) {
      return mark.first.starts_with(prefix) && mark.second == new_name->node.Scalar();
    });
  }
  // What `over` writes is written for the component it names, unless `over` carried it itself.
  for (const auto& [key, value] : over.tree.entries()) base.carried.erase(key);
  for (const auto& [key, from] : over.carried) base.carried[key] = from;
  base.tree.merge(over.tree);
}

void merge_layer(LayeredConfig& base, const ConfigTree& over) {
  merge_layer(base, LayeredConfig{over});
}

namespace {

// yaml-cpp's message for a tab in the indentation ("illegal map value", ...) does not say so: the
// first line that indents with one, for the syntax error's message.
// `{root: ${DATA}/x}`: YAML reads `{` of `${` as a flow mapping opening inside the value, and
// says only "end of map flow not found". Where the line holds a `${`, say what to write instead.
std::string flow_map_variable_hint(const std::string& message, const std::string& text,
                                   int zero_based_line) {
  if (message.find("flow") == std::string::npos) return "";
  size_t start = 0;
  for (int line = 0; line < zero_based_line && start != std::string::npos; ++line)
    start = text.find('\n', start) == std::string::npos ? std::string::npos
                                                        : text.find('\n', start) + 1;
  if (start == std::string::npos) return "";
  const std::string line = text.substr(start, text.find('\n', start) - start);
  if (line.find("${") == std::string::npos) return "";
  return "; inside a {...} mapping YAML reads the { of ${VAR} as another mapping: quote the value "
         "(root: \"${VAR}/data\")";
}

std::string tab_indent_hint(const std::string& text) {
  int line = 1;
  for (size_t start = 0; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const size_t first = text.find_first_not_of(' ', start);
    if (first < end && text[first] == '\t')
      return fmt::format(
          "; line {} indents with a tab, which YAML does not allow: indent with "
          "spaces",
          line);
    start = end + 1;
  }
  return "";
}

// What an experiment file may ask of the reader: a script-generated file of a million lines or a
// thousand nested levels is a mistake, refused with the limit rather than read into memory or
// recursed into.
// Aliases (`*name`) share nodes, so a small file can stand for billions of them ("billion laughs"):
// the nodes are counted as reading them would visit them.
constexpr uintmax_t kMaxFileBytes = 4 << 20;
constexpr int kMaxDepth = 32;
constexpr int64_t kMaxNodes = 1'000'000;

struct YamlSize {
  int depth = 0;
  int64_t nodes = 0;
  bool too_big() const { return depth > kMaxDepth || nodes > kMaxNodes; }
  std::string problem(const std::string& what) const {
    return depth > kMaxDepth
               ? fmt::format(
                     "{} nests deeper than {} levels; an experiment's settings are a few "
                     "levels deep",
                     what, kMaxDepth)
               : fmt::format(
                     "{} stands for more than {} values (aliases repeated within "
                     "aliases?)",
                     what, kMaxNodes);
  }
};

// How deep `node` nests and how many nodes reading it visits, without recursion; stops counting
// past the limits.
YamlSize size_of(const YAML::Node& node) {
  std::vector<std::pair<YAML::Node, int>> stack = {{node, 1}};
  YamlSize size;
  while (!stack.empty()) {
    auto [current, depth] = stack.back();
    stack.pop_back();
    size.depth = std::max(size.depth, depth);
    if (++size.nodes > kMaxNodes || size.too_big()) return size;
    if (current.IsMap())
      for (auto it = current.begin(); it != current.end(); ++it) {
        stack.push_back({it->first, depth + 1});
        stack.push_back({it->second, depth + 1});
      }
    else if (current.IsSequence())
      for (const auto& item : current) stack.push_back({item, depth + 1});
  }
  return size;
}

// ${NAME} and ${NAME:-default} in `text`, from the environment (as the shell reads them: the
// default also stands in for a variable set to ""); $${ is a literal ${. "" and a problem for
// `diagnostics` at `origin` when a variable is unset without a default or the syntax is wrong.
std::string expand_environment(const std::string& text, const Origin& origin,
                               Diagnostics& diagnostics) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 3, "$${") == 0) {
      out += "${";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      out += text[i++];
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string::npos) {
      diagnostics.error(origin, fmt::format("'{}': '${{' without its '}}'; write ${{NAME}} or "
                                            "${{NAME:-default}} ($${{ for a literal ${{)",
                                            text));
      return "";
    }
    const std::string inside = text.substr(i + 2, close - i - 2);
    const size_t dash = inside.find(":-");
    const std::string name = inside.substr(0, dash);
    const bool valid = !name.empty() &&
                       (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                       std::all_of(name.begin(), name.end(),
                                   [](unsigned char c) { return std::isalnum(c) || c == '_'; });
    if (!valid) {
      diagnostics.error(origin, fmt::format("'${{{}}}' is not an environment variable: a name is "
                                            "letters, digits and _ (${{NAME}} or "
                                            "${{NAME:-default}})",
                                            inside));
      return "";
    }
    const char* value = std::getenv(name.c_str());
    if (value != nullptr && *value != '\0') {
      out += value;
    } else if (dash != std::string::npos) {
      out += inside.substr(dash + 2);
    } else {
      diagnostics.error(origin, fmt::format("environment variable '{}' is not set (${{{}}}); "
                                            "export it, or give a default: ${{{}:-...}}",
                                            name, name, name));
      return "";
    }
    i = close + 1;
  }
  return out;
}

// Every scalar of `node` holding "${" (in sequences and maps too: a sweep's variants) expanded;
// other nodes are left as they are (with their positions).
YAML::Node expand_node(const YAML::Node& node, const Origin& origin, Diagnostics& diagnostics) {
  if (node.IsScalar()) {
    if (node.Scalar().find("${") == std::string::npos) return node;
    return YAML::Node(expand_environment(node.Scalar(), origin, diagnostics));
  }
  if (node.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const auto& item : node)
      out.push_back(expand_node(item, origin_of(item, origin.file), diagnostics));
    return out;
  }
  if (node.IsMap()) {
    YAML::Node out(YAML::NodeType::Map);
    for (auto it = node.begin(); it != node.end(); ++it)
      out[it->first] = expand_node(it->second, origin_of(it->second, origin.file), diagnostics);
    return out;
  }
  return node;
}

bool mentions_environment(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar().find("${") != std::string::npos;
  if (node.IsSequence() || node.IsMap())
    for (auto it = node.begin(); it != node.end(); ++it)
      if (mentions_environment(node.IsMap() ? it->second : *it)) return true;
  return false;
}

// The environment variables in a file's values, expanded in place (the resolved config stores
// the expanded value; the position stays the value's own).
void expand_environment(ConfigTree& tree, Diagnostics& diagnostics) {
  const auto entries = tree.entries();  // a copy: set() rewrites the list
  for (const auto& [key, value] : entries) {
    if (!mentions_environment(value.node)) continue;
    tree.set(key,
             {expand_node(value.node, value.origin, diagnostics), value.origin, value.key_origin});
  }
}

// read_experiment_file() for one file of the chain: `chain` holds the files being read, to catch
// cycles.
LayeredConfig read_config_file(const std::string& file, const Origin& referenced_at,
                               std::vector<std::string>& chain, Diagnostics& diagnostics) {
  LayeredConfig layered;
  ConfigTree& tree = layered.tree;
  std::error_code ec;
  fs::path path(file);
  if (!fs::exists(path, ec)) {
    // A parent that `extends` names (written at a line): where it was looked for.
    diagnostics.error(
        referenced_at,
        referenced_at.line > 0
            ? fmt::format("cannot read '{}': no such file (an 'extends' path is found from the "
                          "folder of the file that names it: looked for {})",
                          file, fs::absolute(path, ec).lexically_normal().string())
            : fmt::format("cannot read '{}': no such file", file));
    return layered;
  }
  std::ifstream in(file);
  if (!in || fs::is_directory(path, ec)) {
    diagnostics.error(referenced_at, fmt::format("cannot read '{}': not a readable file", file));
    return layered;
  }
  if (const uintmax_t size = fs::file_size(path, ec); !ec && size > kMaxFileBytes) {
    diagnostics.error(referenced_at,
                      fmt::format("'{}' is {} bytes; an experiment file may have at most {} (a "
                                  "sweep's grid says in a few lines what a generated file spells "
                                  "out)",
                                  file, size, kMaxFileBytes));
    return layered;
  }
  std::string canonical = fs::weakly_canonical(path, ec).string();
  for (const auto& seen : chain) {
    if (seen == canonical) {
      diagnostics.error(referenced_at, fmt::format("'extends' forms a cycle: {} -> {}",
                                                   join(chain, " -> "), file));
      return layered;
    }
  }
  std::string text;
  if (!read_at_most(in, kMaxFileBytes, text)) {  // a device or a pipe: its size said nothing
    diagnostics.error(referenced_at,
                      fmt::format("'{}' goes on past {} bytes (a device, or a pipe that does not "
                                  "end?); an experiment file may have at most {}",
                                  file, kMaxFileBytes, kMaxFileBytes));
    return layered;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    diagnostics.error({file, e.mark.line + 1, e.mark.column + 1},
                      "YAML syntax error: " + e.msg + tab_indent_hint(text) +
                          flow_map_variable_hint(e.msg, text, e.mark.line));
    return layered;
  }
  if (root.IsNull()) return layered;  // an empty file is an empty config
  if (const YamlSize size = size_of(root); size.too_big()) {
    diagnostics.error(file_origin(file), size.problem("'" + file + "'"));
    return layered;
  }
  report_duplicate_keys(root, file, diagnostics);
  if (!root.IsMap()) {
    diagnostics.error(origin_of(root, file),
                      "an experiment file must be a mapping of sections (model, dataset, ...)");
    return layered;
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
      merge_layer(layered, read_config_file(parent_path.lexically_normal().string(),
                                            origin_of(parent, file), chain, diagnostics));
    }
  }
  chain.pop_back();
  ConfigTree own;
  flatten_into(own, root, file);
  own.erase("extends");
  expand_environment(own, diagnostics);
  expand_component_shorthand(own);
  tree.erase("name");  // a name belongs to one file; a child without one takes its own file's
  merge_layer(layered, own);
  return layered;
}

}  // namespace

LayeredConfig read_experiment_file(const std::string& file, Diagnostics& diagnostics) {
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
  if (const YamlSize size = size_of(value); size.too_big()) {
    diagnostics.error(origin, size.problem("the value"));
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
