// Declare each option once. An OptionSet<Opts> binds YAML keys to the members of a plain options
// struct: the struct's member initialisers are the defaults, and each add() gives the key, the
// help and the rule. That one declaration drives decoding and validation (every problem with its
// origin), the resolved-config dump, and `trainyard list`.
//
//   struct VitOptions { int64_t depth = 12; double dropout = 0.0; };
//   OptionSet<VitOptions> options;
//   options.add("depth", &VitOptions::depth, "transformer blocks", at_least(1))
//          .add("dropout", &VitOptions::dropout, "dropout probability", between(0, 1));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

// What `trainyard list` prints for one option.
struct OptionInfo {
  std::string key;
  std::string type;           // "int", "float", "bool", "string", "list"
  std::string default_value;  // as YAML text
  std::string rule;           // "≥ 1", "one of: a, b", "required", or ""
  std::string help;
  bool names_data = false;  // a file or folder the run trains on (names_data below)
};

// The constraint on one option's value.
struct Rule {
  std::optional<double> min;
  std::optional<double> max;
  bool min_exclusive = false;
  std::vector<std::string> choices;  // for strings, and for every element of a list
  bool required = false;             // no default: the user must give a value
  bool names_data = false;           // see names_data()
  std::string describe() const;
};

inline Rule at_least(double min) {
  Rule r;
  r.min = min;
  return r;
}
inline Rule greater_than(double min) {
  Rule r = at_least(min);
  r.min_exclusive = true;
  return r;
}
inline Rule between(double min, double max) {
  Rule r = at_least(min);
  r.max = max;
  return r;
}
inline Rule one_of(std::vector<std::string> choices) {
  Rule r;
  r.choices = std::move(choices);
  return r;
}
inline Rule required() {
  Rule r;
  r.required = true;
  return r;
}
// A string option naming a file or folder whose contents the run trains on (a dataset's root, a
// weights file, a vocabulary): the run's identity takes the contents' fingerprint
// (common/fingerprint.h), not the path, so the same data elsewhere is the same configuration.
inline Rule names_data(Rule rule = {}) {
  rule.names_data = true;
  return rule;
}

// Decoding of one YAML value into a C++ value. On failure returns false and says what was expected.
bool decode_value(const YAML::Node& node, int64_t& out, std::string& expected);
bool decode_value(const YAML::Node& node, double& out, std::string& expected);
bool decode_value(const YAML::Node& node, bool& out, std::string& expected);
bool decode_value(const YAML::Node& node, std::string& out, std::string& expected);
bool decode_value(const YAML::Node& node, std::vector<std::string>& out, std::string& expected);

YAML::Node encode_value(int64_t value);
YAML::Node encode_value(double value);
YAML::Node encode_value(bool value);
YAML::Node encode_value(const std::string& value);
YAML::Node encode_value(const std::vector<std::string>& value);

template <class T>
const char* type_name();
template <>
inline const char* type_name<int64_t>() {
  return "int";
}
template <>
inline const char* type_name<double>() {
  return "float";
}
template <>
inline const char* type_name<bool>() {
  return "bool";
}
template <>
inline const char* type_name<std::string>() {
  return "string";
}
template <>
inline const char* type_name<std::vector<std::string>>() {
  return "list";
}

// Checks `value` against `rule`; on failure returns the message ("must be ≥ 1, got 0").
std::optional<std::string> check_rule(const Rule& rule, double value);
std::optional<std::string> check_rule(const Rule& rule, bool value);
std::optional<std::string> check_rule(const Rule& rule, const std::string& value);
std::optional<std::string> check_rule(const Rule& rule, const std::vector<std::string>& value);
inline std::optional<std::string> check_rule(const Rule& rule, int64_t value) {
  return check_rule(rule, static_cast<double>(value));
}

// One-line YAML text of a value ("[a, b]", "0.001"), and a description for messages ("'abc'",
// "a list", "a mapping").
std::string yaml_flow_text(const YAML::Node& node);

// A resolved config's text (RunSpec::config_yaml) flat: dotted key -> value as YAML text, scalars
// as written, lists in flow style ("[1, 2]"). What the store's run_params hold and what the report
// compares configurations by. Empty when the text is not a YAML mapping.
std::map<std::string, std::string> flat_config(const std::string& yaml_text);
std::string describe_yaml_value(const YAML::Node& node);

// Reports the keys of `section` that are not in `known` (with a "did you mean" hint).
// `where` names the section in messages, e.g. "model 'vit'"; `prefix` is its dotted path.
void report_unknown_keys(const ConfigTree& section, const std::vector<std::string>& known,
                         const std::string& prefix, const std::string& where,
                         Diagnostics& diagnostics);

// A mapping written where `key` takes one value ("epochs: {value: 3}") flattens to keys below
// it, which a check for unknown keys takes as known: reports "'<name>' must be <expected>, got a
// mapping" and returns true when `section` has any, or the value would be silently ignored.
bool report_mapping_for_value(const ConfigTree& section, const std::string& key,
                              const std::string& name, const std::string& expected,
                              Diagnostics& diagnostics);

// An option whose value is one word of a fixed set, read once into an enum E: specialise
// OptionWords<E> with `words`, its (word, value) pairs in the order `trainyard list` shows them.
// The config keeps the word; the code compares the enum.
//
//   enum class Checkpoint { best, last };
//   template <> struct OptionWords<Checkpoint> {
//     static constexpr std::pair<const char*, Checkpoint> words[] = {{"best", Checkpoint::best},
//                                                                     {"last", Checkpoint::last}};
//   };
template <class E>
struct OptionWords;

// The word of `value` ("?" for a value its table lacks).
template <class E>
const char* option_word(E value) {
  for (const auto& [word, v] : OptionWords<E>::words)
    if (v == value) return word;
  return "?";
}

template <class Opts>
class OptionSet {
 public:
  template <class T>
  OptionSet& add(std::string key, T Opts::*member, std::string help, Rule rule = {}) {
    if constexpr (std::is_enum_v<T>)
      return add_words(std::move(key), member, std::move(help), std::move(rule));
    else
      return add_value(std::move(key), member, std::move(help), std::move(rule));
  }

  // A check across options ("image_size must be a multiple of patch_size"): returns the problem,
  // or nullopt. Runs after the options decoded cleanly.
  OptionSet& check(std::function<std::optional<std::string>(const Opts&)> check) {
    checks_.push_back(std::move(check));
    return *this;
  }

  // Decodes `section` (keys relative to `prefix`) into an Opts, starting from the defaults.
  // Keys in `ignore` (and below them) belong to someone else and are skipped.
  Opts decode(const ConfigTree& section, const std::string& prefix, const std::string& where,
              const Origin& section_origin, Diagnostics& diagnostics,
              const std::vector<std::string>& ignore = {}) const;

  // Every option of `opts`, for the resolved config.
  ConfigTree encode(const Opts& opts, const std::string& prefix, const Origin& origin) const {
    ConfigTree tree;
    for (const auto& field : fields_)
      tree.set(prefix.empty() ? field.info.key : prefix + "." + field.info.key,
               {field.encode(opts), origin, origin});
    return tree;
  }

  std::vector<OptionInfo> describe() const {
    std::vector<OptionInfo> infos;
    for (const auto& field : fields_) infos.push_back(field.info);
    return infos;
  }

 private:
  // An enum option: a string whose rule is its words, kept in the config as its word.
  template <class E>
  OptionSet& add_words(std::string key, E Opts::*member, std::string help, Rule rule) {
    for (const auto& [word, value] : OptionWords<E>::words) rule.choices.push_back(word);
    Field field;
    field.info = {key, "string", "", rule.describe(), std::move(help), rule.names_data};
    field.required = rule.required;
    field.expected = "a string";
    field.decode = [member, rule](Opts& opts, const ConfigValue& value, const std::string& name,
                                  Diagnostics& diagnostics) {
      std::string expected, word;
      if (!decode_value(value.node, word, expected)) {
        diagnostics.error(value.origin, "'" + name + "' must be " + expected + ", got " +
                                            describe_yaml_value(value.node));
        return;
      }
      if (auto problem = check_rule(rule, word)) {
        diagnostics.error(value.origin, "'" + name + "' " + *problem);
        return;
      }
      for (const auto& [known, e] : OptionWords<E>::words)
        if (word == known) opts.*member = e;
    };
    field.encode = [member](const Opts& opts) {
      return encode_value(std::string(option_word(opts.*member)));
    };
    if (!rule.required) field.info.default_value = option_word(Opts{}.*member);
    fields_.push_back(std::move(field));
    return *this;
  }

  template <class T>
  OptionSet& add_value(std::string key, T Opts::*member, std::string help, Rule rule) {
    Field field;
    field.info = {key, type_name<T>(), "", rule.describe(), std::move(help), rule.names_data};
    field.required = rule.required;
    {  // what a value must be, for "takes one value" messages
      T unused{};
      decode_value(YAML::Node(YAML::NodeType::Map), unused, field.expected);
    }
    field.decode = [member, rule](Opts& opts, const ConfigValue& value, const std::string& name,
                                  Diagnostics& diagnostics) {
      std::string expected;
      T decoded{};
      if (!decode_value(value.node, decoded, expected)) {
        diagnostics.error(value.origin, "'" + name + "' must be " + expected + ", got " +
                                            describe_yaml_value(value.node));
        return;
      }
      if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        // Every bad entry of a list, each where it is written.
        bool bad = false;
        for (const auto& item : value.node) {
          if (auto problem = check_rule(rule, item.Scalar())) {
            diagnostics.error(origin_of(item, value.origin.file), "'" + name + "' " + *problem);
            bad = true;
          }
        }
        if (bad) return;
      } else if (auto problem = check_rule(rule, decoded)) {
        diagnostics.error(value.origin, "'" + name + "' " + *problem);
        return;
      }
      opts.*member = std::move(decoded);
    };
    field.encode = [member](const Opts& opts) { return encode_value(opts.*member); };
    if (!rule.required) field.info.default_value = yaml_flow_text(encode_value(Opts{}.*member));
    fields_.push_back(std::move(field));
    return *this;
  }

  struct Field {
    OptionInfo info;
    bool required = false;
    std::string expected;  // "an integer", "a list of strings"
    std::function<void(Opts&, const ConfigValue&, const std::string&, Diagnostics&)> decode;
    std::function<YAML::Node(const Opts&)> encode;
  };

  std::vector<Field> fields_;
  std::vector<std::function<std::optional<std::string>(const Opts&)>> checks_;
};

template <class Opts>
Opts OptionSet<Opts>::decode(const ConfigTree& section, const std::string& prefix,
                             const std::string& where, const Origin& section_origin,
                             Diagnostics& diagnostics,
                             const std::vector<std::string>& ignore) const {
  Opts opts{};
  const size_t errors_before = diagnostics.size();
  std::vector<std::string> known = ignore;
  for (const auto& field : fields_) known.push_back(field.info.key);
  report_unknown_keys(section, known, prefix, where, diagnostics);
  for (const auto& field : fields_) {
    const ConfigValue* value = section.find(field.info.key);
    std::string name = prefix.empty() ? field.info.key : prefix + "." + field.info.key;
    if (report_mapping_for_value(section, field.info.key, name, field.expected, diagnostics))
      continue;
    if (value == nullptr || value->node.IsNull()) {
      if (field.required)
        diagnostics.error(value ? value->origin : section_origin,
                          "missing required key '" + name + "' for " + where);
      else if (value)
        diagnostics.error(value->origin, "'" + name +
                                             "' has no value; remove the key to use "
                                             "the default (" +
                                             field.info.default_value + ")");
      continue;
    }
    field.decode(opts, *value, name, diagnostics);
  }
  if (diagnostics.size() == errors_before)
    for (const auto& check : checks_)
      if (auto problem = check(opts)) diagnostics.error(section_origin, where + ": " + *problem);
  return opts;
}

}  // namespace trainyard
#pragma GCC visibility pop
