#include "trainyard/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "common/text.h"

namespace trainyard {

namespace {

// A plain (unquoted) scalar is typed by its text; a quoted one is always a string.
bool is_plain_scalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

std::string number_text(double value) {
  // Shortest text that reads back as the same double, as YAML wants it.
  return fmt::format("{}", value);
}

}  // namespace

std::string Rule::describe() const {
  if (required) return "required";
  if (!choices.empty()) return "one of: " + join(choices);
  if (min && max) return fmt::format("{} to {}", number_text(*min), number_text(*max));
  if (min) return fmt::format("{} {}", min_exclusive ? ">" : "≥", number_text(*min));
  if (max) return fmt::format("≤ {}", number_text(*max));
  return "";
}

bool decode_value(const YAML::Node& node, int64_t& out, std::string& expected) {
  expected = "an integer";
  if (!is_plain_scalar(node)) return false;
  const std::string& text = node.Scalar();
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

bool decode_value(const YAML::Node& node, double& out, std::string& expected) {
  expected = "a number";
  if (!is_plain_scalar(node) || node.Scalar().empty()) return false;
  const std::string& text = node.Scalar();
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(out);
}

bool decode_value(const YAML::Node& node, bool& out, std::string& expected) {
  expected = "true or false";
  if (!is_plain_scalar(node)) return false;
  const std::string& text = node.Scalar();
  if (text == "true" || text == "True") return out = true, true;
  if (text == "false" || text == "False") return out = false, true;
  return false;
}

bool decode_value(const YAML::Node& node, std::string& out, std::string& expected) {
  expected = "a string";
  if (!node.IsScalar()) return false;
  out = node.Scalar();
  return true;
}

bool decode_value(const YAML::Node& node, std::vector<std::string>& out, std::string& expected) {
  expected = "a list of strings";
  if (!node.IsSequence()) return false;
  out.clear();
  for (const auto& item : node) {
    if (!item.IsScalar()) return false;
    out.push_back(item.Scalar());
  }
  return true;
}

YAML::Node encode_value(int64_t value) { return YAML::Node(value); }
YAML::Node encode_value(double value) {
  std::string text = number_text(value);
  // Keep floats recognisable as floats in the dump ("1" would read back as an int).
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return YAML::Node(text);
}
YAML::Node encode_value(bool value) { return YAML::Node(value ? "true" : "false"); }
YAML::Node encode_value(const std::string& value) { return YAML::Node(value); }
YAML::Node encode_value(const std::vector<std::string>& value) {
  YAML::Node node(YAML::NodeType::Sequence);
  for (const auto& item : value) node.push_back(item);
  return node;
}

std::optional<std::string> check_rule(const Rule& rule, double value) {
  bool below = rule.min && (rule.min_exclusive ? value <= *rule.min : value < *rule.min);
  bool above = rule.max && value > *rule.max;
  if (below || above) return fmt::format("must be {}, got {}", rule.describe(), number_text(value));
  return std::nullopt;
}

std::optional<std::string> check_rule(const Rule&, bool) { return std::nullopt; }

std::optional<std::string> check_rule(const Rule& rule, const std::string& value) {
  if (rule.choices.empty()) return std::nullopt;
  for (const auto& choice : rule.choices)
    if (choice == value) return std::nullopt;
  std::string message = fmt::format("has unknown value '{}'", value);
  std::string guess = closest_match(value, rule.choices);
  if (!guess.empty()) message += fmt::format(" (did you mean '{}'?)", guess);
  return message + "; expected one of: " + join(rule.choices);
}

std::optional<std::string> check_rule(const Rule& rule, const std::vector<std::string>& value) {
  for (const auto& item : value)
    if (auto problem = check_rule(rule, item)) return problem;
  return std::nullopt;
}

std::string yaml_flow_text(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::map<std::string, std::string> flat_config(const std::string& yaml_text) {
  std::map<std::string, std::string> flat;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception&) {
    return flat;
  }
  if (!root.IsMap()) return flat;
  ConfigTree tree;
  flatten_into(tree, root, "<resolved config>");
  for (const auto& [key, value] : tree.entries())
    flat[key] = value.node.IsScalar() ? value.node.Scalar() : yaml_flow_text(value.node);
  return flat;
}

std::string describe_yaml_value(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  if (node.IsNull()) return "nothing";
  return "'" + node.Scalar() + "'";
}

bool report_mapping_for_value(const ConfigTree& section, const std::string& key,
                              const std::string& name, const std::string& expected,
                              Diagnostics& diagnostics) {
  for (const auto& [k, value] : section.entries())
    if (k.size() > key.size() && key_is_under(k, key)) {
      diagnostics.error(section.key_origin(key, value),
                        "'" + name + "' must be " + expected + ", got a mapping");
      return true;
    }
  return false;
}

namespace {

// What the known keys have right after `path` (their next segment), or at the top when it is "".
std::vector<std::string> keys_after(const std::string& path,
                                    const std::vector<std::string>& known) {
  std::vector<std::string> next;
  for (const auto& k : known) {
    if (!path.empty() && !(k.size() > path.size() && key_is_under(k, path))) continue;
    const std::string segment = split(path.empty() ? k : k.substr(path.size() + 1), '.').front();
    if (std::find(next.begin(), next.end(), segment) == next.end()) next.push_back(segment);
  }
  return next;
}

}  // namespace

void report_unknown_keys(const ConfigTree& section, const std::vector<std::string>& known,
                         const std::string& prefix, const std::string& where,
                         Diagnostics& diagnostics) {
  auto full = [&](const std::string& key) { return prefix.empty() ? key : prefix + "." + key; };
  std::vector<std::string> reported;
  for (const auto& [key, value] : section.entries()) {
    bool found = false;
    for (const auto& k : known) found = found || key_is_under(key, k);
    if (found) continue;
    // The unknown key ends at the first segment no known key has there: in 'early_stop.patiance'
    // it is 'patiance' (early_stop has metric, patience, min_delta), and "trian: {epochs: 1,
    // seed: 2}" is one unknown key, 'trian', not two.
    std::string parent;  // the segments before it, which known keys share ("" or "a.b.")
    std::vector<std::string> choices = keys_after("", known);
    std::string unknown;
    bool diverged = false;
    for (const std::string& segment : split(key, '.')) {
      if (std::find(choices.begin(), choices.end(), segment) == choices.end()) {
        unknown = parent + segment;
        diverged = true;
        break;
      }
      parent += segment + ".";
      choices = keys_after(parent.substr(0, parent.size() - 1), known);
    }
    // Not diverged: the whole key is known, and known keys go on below it.
    if (!diverged) unknown = parent.substr(0, parent.size() - 1);
    if (std::find(reported.begin(), reported.end(), unknown) != reported.end()) continue;
    reported.push_back(unknown);
    if (!diverged) {  // a value where known keys have a mapping (early_stop: 3)
      diagnostics.error(value.key_origin, fmt::format("'{}' takes a mapping of {} (for {})",
                                                      full(unknown), join(choices), where));
      continue;
    }
    const Origin at = section.key_origin(unknown, value);  // "trian:", not its first child
    std::string message = fmt::format("unknown key '{}' for {}", full(unknown), where);
    std::string guess = closest_match(unknown.substr(parent.size()), choices);
    if (guess.empty()) {  // a word of the key: warmup for warmup_steps
      const std::string word = unknown.substr(parent.size());
      for (const auto& choice : choices)
        if (choice.starts_with(word + "_") || choice.ends_with("_" + word)) {
          guess = choice;
          break;
        }
    }
    if (guess.empty()) {  // a dot for an underscore or the reverse: early_stop_patience
      std::vector<std::string> below;
      for (const auto& k : known)
        if (k.size() > parent.size() && k.starts_with(parent))
          below.push_back(k.substr(parent.size()));
      guess = closest_match(key.substr(parent.size()), below);
    }
    if (!guess.empty()) {
      message += fmt::format(" (did you mean '{}'?)", parent + guess);
    } else {
      for (auto& choice : choices) choice = parent + choice;
      message += "; known keys: " + join(choices);
    }
    diagnostics.error(at, message);
  }
}

}  // namespace trainyard
