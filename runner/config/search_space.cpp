#include "runner/config/search_space.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "common/text.h"
#include "runner/config/layering.h"
#include "trainyard/options.h"

namespace trainyard {

namespace {

const std::vector<std::string> kSearchKeys = {"method", "trials",   "seed",           "space",
                                              "metric", "schedule", "confirm_repeats"};
const std::vector<std::string> kDistributions = {"uniform", "log_uniform", "int_uniform", "choice"};
const std::vector<std::string> kRunSections = {"model", "dataset", "train", "runtime"};

// A whole number from `low` to `high` at `key` of `search`, or `fallback` when absent.
int64_t whole_number(const ConfigTree& search, const std::string& key, int64_t low, int64_t high,
                     int64_t fallback, const std::string& what, Diagnostics& diagnostics) {
  const ConfigValue* value = search.find(key);
  if (value == nullptr) return fallback;
  int64_t number = 0;
  std::string expected;
  if (!decode_value(value->node, number, expected) || number < low || number > high) {
    diagnostics.error(value->origin,
                      fmt::format("'sweep.search.{}' must be a whole number from {} to {} ({}), "
                                  "got {}",
                                  key, low, high, what, describe_yaml_value(value->node)));
    return fallback;
  }
  return number;
}

// The first key inside `node` (a choice's value, at any depth) that names a prior, as the key's
// node; an undefined node when there is none.
YAML::Node nested_prior(const YAML::Node& node) {
  if (!node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (auto it = node.begin(); it != node.end(); ++it) {
    // A prior's word with a list, as a parameter writes it (an option named "choice" is not one).
    if (it->first.IsScalar() && it->second.IsSequence() &&
        std::find(kDistributions.begin(), kDistributions.end(), it->first.Scalar()) !=
            kDistributions.end())
      return it->first;
    if (const YAML::Node inner = nested_prior(it->second); inner.IsDefined()) return inner;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// One parameter of the space: `key` ("train.optimizer.lr.log_uniform") names the setting and, last,
// its distribution.
std::optional<SearchParameter> read_parameter(const std::string& key, const ConfigValue& value,
                                              Diagnostics& diagnostics) {
  const size_t dot = key.rfind('.');
  const std::string word = dot == std::string::npos ? key : key.substr(dot + 1);
  SearchParameter parameter;
  parameter.key = dot == std::string::npos ? "" : key.substr(0, dot);
  parameter.origin = value.key_origin;
  const auto it = std::find(kDistributions.begin(), kDistributions.end(), word);
  if (it == kDistributions.end() || parameter.key.empty()) {
    const std::string guess = closest_match(word, kDistributions);
    diagnostics.error(value.key_origin,
                      fmt::format("'sweep.search.space.{}': each parameter is a setting with its "
                                  "prior: {{uniform: [low, high]}}, {{log_uniform: [low, high]}}, "
                                  "{{int_uniform: [low, high]}} or {{choice: [a, b, ...]}}{}",
                                  key, guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
    return std::nullopt;
  }
  parameter.distribution = static_cast<Distribution>(it - kDistributions.begin());
  const std::string where = "'sweep.search.space." + key + "'";
  if (!value.node.IsSequence() || value.node.size() == 0) {
    diagnostics.error(value.origin, where + " must be a list");
    return std::nullopt;
  }
  if (parameter.distribution == Distribution::choice) {
    for (const auto& item : value.node) {
      if (const YAML::Node prior = nested_prior(item); prior.IsDefined()) {
        diagnostics.error(origin_of(prior, value.origin.file),
                          fmt::format("{}: a prior inside a choice ('{}') would be a conditional "
                                      "space, which is not built yet; give each choice fixed "
                                      "values, or search that setting as a parameter of its own "
                                      "beside the choice (e.g. {}.lr: {{log_uniform: [...]}})",
                                      where, yaml_flow_text(prior), parameter.key));
        return std::nullopt;
      }
      parameter.choices.push_back(item);
    }
    return parameter;
  }
  std::string expected;
  if (value.node.size() != 2 || !decode_value(value.node[0], parameter.low, expected) ||
      !decode_value(value.node[1], parameter.high, expected) || !std::isfinite(parameter.low) ||
      !std::isfinite(parameter.high) || parameter.low >= parameter.high) {
    diagnostics.error(value.origin, where +
                                        " must be [low, high], two numbers with low < high, got " +
                                        describe_yaml_value(value.node));
    return std::nullopt;
  }
  if (parameter.distribution == Distribution::log_uniform && parameter.low <= 0) {
    diagnostics.error(value.origin, where + ": a log-uniform range must be above 0, got " +
                                        describe_yaml_value(value.node));
    return std::nullopt;
  }
  if (parameter.distribution == Distribution::int_uniform &&
      (parameter.low != std::floor(parameter.low) ||
       parameter.high != std::floor(parameter.high))) {
    diagnostics.error(value.origin,
                      where + " must be two whole numbers, got " + describe_yaml_value(value.node));
    return std::nullopt;
  }
  return parameter;
}

// Whether `key` is a section that names a component (model, train.optimizer, ...).
bool names_component(const std::string& key) {
  return std::any_of(std::begin(kComponentSections), std::end(kComponentSections),
                     [&](const ComponentSection& section) { return key == section.path; });
}

}  // namespace

const char* to_string(SearchMethod method) {
  switch (method) {
    case SearchMethod::grid:
      return "grid";
    case SearchMethod::random:
      return "random";
    case SearchMethod::tpe:
      return "tpe";
  }
  return "?";
}

std::optional<SearchSettings> decode_search(const ConfigTree& sweep, size_t variants,
                                            int64_t max_runs, Diagnostics& diagnostics) {
  const ConfigTree search = sweep.subtree("search");
  const ConfigValue* scalar = sweep.find("search");
  if (search.empty() && scalar == nullptr) return std::nullopt;
  if (scalar != nullptr) {
    diagnostics.error(scalar->origin,
                      "'sweep.search' must be a mapping: method, trials, seed, space, metric, "
                      "schedule, confirm_repeats");
    return std::nullopt;
  }
  report_unknown_keys(search, kSearchKeys, "sweep.search", "section 'sweep.search'", diagnostics);
  for (const char* other : {"grid", "repeats"})
    if (const ConfigValue* value = sweep.find(other); value || !sweep.subtree(other).empty())
      diagnostics.error(value ? value->key_origin : search.entries().front().second.key_origin,
                        std::string(other) == "grid"
                            ? "'sweep.grid' and 'sweep.search' together: a search's space "
                              "replaces the grid (method: grid with choice parameters is one)"
                            : "'sweep.repeats' and 'sweep.search' together: the best settings "
                              "run sweep.search.confirm_repeats times");

  SearchSettings settings;
  for (const auto& [key, value] : search.entries())
    settings.text += key + "=" + yaml_flow_text(value.node) + "\n";
  if (const ConfigValue* value = search.find("method")) {
    std::string method, expected;
    decode_value(value->node, method, expected);
    if (method == "grid")
      settings.method = SearchMethod::grid;
    else if (method == "random")
      settings.method = SearchMethod::random;
    else if (method == "tpe")
      settings.method = SearchMethod::tpe;
    else
      diagnostics.error(value->origin,
                        "'sweep.search.method' is grid (every combination of choice parameters), "
                        "random, or tpe (Bayesian: the Tree-structured Parzen Estimator), got " +
                            describe_yaml_value(value->node));
  }
  settings.seed = static_cast<uint64_t>(
      whole_number(search, "seed", 0, int64_t{1} << 62, 0, "the samplers' seed", diagnostics));
  settings.confirm_repeats =
      whole_number(search, "confirm_repeats", 0, 100, 1,
                   "runs of each variant's best settings, on fresh seeds; 0: none", diagnostics);

  const ConfigTree space = search.subtree("space");
  if (space.empty())
    diagnostics.error(search.entries().empty() ? Origin{} : search.entries().front().second.origin,
                      "'sweep.search.space' is missing: the settings to search, e.g. "
                      "train.optimizer.lr: {log_uniform: [1.0e-5, 1.0e-2]}");
  for (const auto& [key, value] : space.entries()) {
    std::optional<SearchParameter> parameter = read_parameter(key, value, diagnostics);
    if (!parameter) continue;
    const std::string section = split(parameter->key, '.').front();
    if (std::find(kRunSections.begin(), kRunSections.end(), section) == kRunSections.end()) {
      diagnostics.error(parameter->origin,
                        fmt::format("'sweep.search.space.{}': a search sets a run's settings "
                                    "(model, dataset, train, runtime), not '{}'",
                                    key, parameter->key));
      continue;
    }
    if (parameter->key == "train.seed") {
      diagnostics.error(parameter->origin,
                        "'sweep.search.space.train.seed': a seed is not a setting to tune; the "
                        "best settings run again on fresh seeds (confirm_repeats)");
      continue;
    }
    for (const auto& other : settings.space)
      if (other.key == parameter->key)
        diagnostics.error(parameter->origin,
                          fmt::format("'{}' is in the space twice", parameter->key));
    settings.space.push_back(std::move(*parameter));
  }

  // A setting inside a chosen section: set twice when a choice writes it too.
  for (const SearchParameter& outer : settings.space)
    for (const SearchParameter& inner : settings.space) {
      if (&outer == &inner || !key_is_under(inner.key, outer.key)) continue;
      for (const YAML::Node& choice : outer.choices) {
        if (!choice.IsMap()) continue;
        ConfigTree written;
        flatten_into(written, choice, outer.origin.file, outer.key);
        if (written.find(inner.key) || !written.subtree(inner.key).empty()) {
          diagnostics.error(inner.origin,
                            fmt::format("'{}' is searched twice: as a parameter, and by the "
                                        "choice {} of '{}'; search it in one place",
                                        inner.key, yaml_flow_text(choice), outer.key));
          break;
        }
      }
    }

  if (settings.method == SearchMethod::grid) {
    double combinations = 1;
    for (const auto& parameter : settings.space) {
      if (parameter.distribution != Distribution::choice)
        diagnostics.error(parameter.origin,
                          fmt::format("method grid takes choice parameters only; '{}' is a range "
                                      "(use method random or tpe, or list its values as a choice)",
                                      parameter.key));
      combinations *= static_cast<double>(std::max<size_t>(1, parameter.choices.size()));
    }
    if (const ConfigValue* value = search.find("trials"))
      diagnostics.error(value->key_origin,
                        "'sweep.search.trials' with method grid: a grid's trials are every "
                        "combination of its choices");
    settings.trials = static_cast<int64_t>(std::min(combinations, 1e12));
  } else {
    const ConfigValue* trials = search.find("trials");
    if (trials == nullptr)
      diagnostics.error(
          search.entries().empty() ? Origin{} : search.entries().front().second.origin,
          "'sweep.search.trials' is missing: how many trials each variant's study "
          "runs (e.g. 24)");
    settings.trials =
        whole_number(search, "trials", 1, 100000, 1, "trials per variant", diagnostics);
  }
  if (static_cast<double>(settings.trials) * static_cast<double>(variants) >
      static_cast<double>(max_runs)) {
    const ConfigValue* where = search.find("trials");
    diagnostics.error(where ? where->origin : search.entries().front().second.origin,
                      fmt::format("the search runs {} trials x {} variant(s), more than the limit "
                                  "of {}; fewer trials, or raise the limit with --max-runs N",
                                  settings.trials, variants, max_runs));
  }

  if (const ConfigValue* value = search.find("metric")) {
    std::string metric, expected;
    decode_value(value->node, metric, expected);
    if (const std::optional<WatchedMetric> watched = watched_metric(metric)) {
      settings.metric = *watched;
    } else if (metric.rfind("test", 0) == 0) {
      diagnostics.error(value->origin,
                        "'sweep.search.metric' " + metric +
                            ": choosing settings by the test split would make its figures "
                            "optimistic; search by val_loss, val_acc or val_f1");
    } else {
      diagnostics.error(value->origin,
                        "'sweep.search.metric' is val_loss (lower is better), val_acc or val_f1 "
                        "(macro-F1; higher), got " +
                            describe_yaml_value(value->node));
    }
  }

  const ConfigTree schedule = search.subtree("schedule");
  if (const ConfigValue* value = search.find("schedule")) {
    std::string word, expected;
    if (!decode_value(value->node, word, expected) || word != "none")
      diagnostics.error(value->origin,
                        "'sweep.search.schedule' is none, or {name: successive-halving, "
                        "grace_epochs: 1, reduction: 3}");
  } else if (!schedule.empty()) {
    report_unknown_keys(schedule, {"name", "grace_epochs", "reduction"}, "sweep.search.schedule",
                        "section 'sweep.search.schedule'", diagnostics);
    const ConfigValue* name = schedule.find("name");
    std::string word, expected;
    if (name == nullptr || !decode_value(name->node, word, expected) ||
        (word != "successive-halving" && word != "none"))
      diagnostics.error(name ? name->origin : schedule.entries().front().second.key_origin,
                        "'sweep.search.schedule.name' is successive-halving or none");
    settings.schedule.on = word == "successive-halving";
    settings.schedule.grace_epochs = whole_number(schedule, "grace_epochs", 1, 10000, 1,
                                                  "epochs every trial trains first", diagnostics);
    settings.schedule.reduction = whole_number(schedule, "reduction", 2, 100, 3,
                                               "1/reduction of a rung goes on", diagnostics);
  }
  for (const auto& parameter : settings.space)
    if (parameter.key == "train.epochs")
      diagnostics.error(parameter.origin,
                        "'train.epochs' in the space: trials are compared at the same epochs (the "
                        "file's train.epochs, or successive halving's rungs up to it); set it in "
                        "the file, or give each budget a variant of its own");
  return settings;
}

YAML::Node parameter_value(const SearchParameter& parameter, double value) {
  switch (parameter.distribution) {
    case Distribution::choice:
      return parameter.choices.at(static_cast<size_t>(value));
    case Distribution::int_uniform:
      return YAML::Node(static_cast<int64_t>(std::llround(value)));
    default:
      return YAML::Node(value);
  }
}

ConfigTree trial_overrides(const std::vector<SearchParameter>& space, const TrialValues& values) {
  ConfigTree overrides;
  for (size_t i = 0; i < space.size(); ++i) {
    const YAML::Node value = parameter_value(space[i], values.at(i));
    // A mapping is written as a variant's `set:` writes one: flat, so that a section named with
    // options of its own is written afresh and a component's name swaps it (merge_layer).
    if (value.IsMap() && value.size() > 0)
      flatten_into(overrides, value, space[i].origin.file, space[i].key);
    else if (names_component(space[i].key) && value.IsScalar())
      // `train.optimizer: {choice: [sgd, adamw]}` names the component: its name alone, so that a
      // parameter inside the section (train.optimizer.lr) set before it is kept.
      overrides.set(space[i].key + ".name", {value, space[i].origin, space[i].origin});
    else
      overrides.set(space[i].key, {value, space[i].origin, space[i].origin});
  }
  return overrides;
}

std::string describe_settings(const std::vector<SearchParameter>& space, const TrialValues& values,
                              const std::string& config_yaml) {
  const std::map<std::string, std::string> params = flat_config(config_yaml);
  auto read = [&](const std::string& key) {
    const auto it = params.find(key);
    return it == params.end() ? std::string("(not set)") : it->second;
  };
  std::vector<std::string> parts;
  for (size_t i = 0; i < space.size() && i < values.size(); ++i) {
    const SearchParameter& parameter = space[i];
    const YAML::Node proposed = parameter_value(parameter, values[i]);
    std::string text;
    if (params.count(parameter.key)) {
      text = read(parameter.key);
      // A number drawn from a range, to the four digits a person compares by.
      if (parameter.distribution == Distribution::uniform ||
          parameter.distribution == Distribution::log_uniform) {
        double number = 0;
        std::string expected;
        if (decode_value(YAML::Load(text), number, expected)) text = fmt::format("{:.4g}", number);
      }
    } else if (proposed.IsMap() && proposed.size() > 0) {
      // The keys the chosen mapping writes, each as the run has it.
      ConfigTree written;
      flatten_into(written, proposed, parameter.origin.file, parameter.key);
      std::vector<std::string> inner;
      for (const auto& [key, value] : written.entries())
        inner.push_back(key.substr(parameter.key.size() + 1) + ": " + read(key));
      text = "{" + join(inner, ", ") + "}";
    } else {
      text = read(parameter.key + ".name");  // a component named by the choice
    }
    parts.push_back(split(parameter.key, '.').back() + "=" + text);
  }
  return join(parts, " ");
}

}  // namespace trainyard
