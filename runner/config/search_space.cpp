#include "runner/config/search_space.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "common/text.h"
#include "runner/config/layering.h"
#include "runner/config/run_spec.h"
#include "trainyard/options.h"

namespace trainyard {

namespace {

const std::vector<std::string> kDistributions = {"uniform", "log_uniform", "int_uniform", "choice"};
const std::vector<std::string> kRunSections = {"model", "dataset", "train", "runtime"};

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

std::vector<SearchParameter> read_parameter(const std::string& key, const ConfigValue& value,
                                            Diagnostics& diagnostics);

// The priors inside a choice's mapping `branch` (a conditional space), each a parameter of the
// branch, in the mapping's order: {name: sgd, lr: {log_uniform: [..]}, momentum: {uniform: [..]}}
// gives lr and momentum. A prior inside one of those (a conditional inside a conditional) is
// refused.
bool read_branch(const SearchParameter& choice, size_t branch, const YAML::Node& node,
                 const std::string& path, std::vector<SearchParameter>& out,
                 Diagnostics& diagnostics) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar() || !it->second.IsMap()) continue;
    const std::string inner = path.empty() ? it->first.Scalar() : path + "." + it->first.Scalar();
    const YAML::Node prior = it->second;
    const bool is_prior = prior.size() == 1 && prior.begin()->first.IsScalar() &&
                          std::find(kDistributions.begin(), kDistributions.end(),
                                    prior.begin()->first.Scalar()) != kDistributions.end() &&
                          prior.begin()->second.IsSequence();
    if (!is_prior) {
      if (!read_branch(choice, branch, prior, inner, out, diagnostics)) return false;
      continue;
    }
    const std::string word = prior.begin()->first.Scalar();
    const ConfigValue written(prior.begin()->second,
                              origin_of(prior.begin()->second, choice.origin.file),
                              origin_of(prior.begin()->first, choice.origin.file));
    std::vector<SearchParameter> read =
        read_parameter(choice.key + "." + inner + "." + word, written, diagnostics);
    if (read.empty()) return false;
    if (read.size() > 1) {
      diagnostics.error(written.key_origin,
                        fmt::format("'{}.{}': a choice with priors inside a branch of a choice "
                                    "(a conditional inside a conditional) is not built; give the "
                                    "inner choice fixed values",
                                    choice.key, inner));
      return false;
    }
    read.front().branch = branch;
    read.front().path = inner;
    read.front().parent = 0;  // the choice: placed by read_space
    out.push_back(std::move(read.front()));
  }
  return true;
}

// One parameter of the space: `key` ("train.optimizer.lr.log_uniform") names the setting and, last,
// its distribution. A choice of mappings with priors inside comes with its branches' parameters
// after it (their `parent` 0 until read_space places them).
std::vector<SearchParameter> read_parameter(const std::string& key, const ConfigValue& value,
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
    return {};
  }
  parameter.distribution = static_cast<Distribution>(it - kDistributions.begin());
  const std::string where = "'sweep.search.space." + key + "'";
  if (!value.node.IsSequence() || value.node.size() == 0) {
    diagnostics.error(value.origin, where + " must be a list");
    return {};
  }
  if (parameter.distribution == Distribution::choice) {
    std::vector<SearchParameter> branches;
    for (const auto& item : value.node) {
      if (const YAML::Node prior = nested_prior(item); prior.IsDefined()) {
        if (!item.IsMap()) {
          diagnostics.error(origin_of(prior, value.origin.file),
                            fmt::format("{}: a prior inside a choice is a branch's parameter; "
                                        "write the branch as a mapping, e.g. {{name: sgd, lr: "
                                        "{{log_uniform: [1.0e-3, 1.0e-1]}}}}",
                                        where));
          return {};
        }
        if (!read_branch(parameter, parameter.choices.size(), item, "", branches, diagnostics))
          return {};
      }
      parameter.choices.push_back(item);
    }
    branches.insert(branches.begin(), parameter);
    return branches;
  }
  std::string expected;
  if (value.node.size() != 2 || !decode_value(value.node[0], parameter.low, expected) ||
      !decode_value(value.node[1], parameter.high, expected) || !std::isfinite(parameter.low) ||
      !std::isfinite(parameter.high) || parameter.low >= parameter.high) {
    diagnostics.error(value.origin, where +
                                        " must be [low, high], two numbers with low < high, got " +
                                        describe_yaml_value(value.node));
    return {};
  }
  if (parameter.distribution == Distribution::log_uniform && parameter.low <= 0) {
    diagnostics.error(value.origin, where + ": a log-uniform range must be above 0, got " +
                                        describe_yaml_value(value.node));
    return {};
  }
  if (parameter.distribution == Distribution::int_uniform &&
      (parameter.low != std::floor(parameter.low) ||
       parameter.high != std::floor(parameter.high))) {
    diagnostics.error(value.origin,
                      where + " must be two whole numbers, got " + describe_yaml_value(value.node));
    return {};
  }
  return {parameter};
}

// Whether `key` is a section that names a component (model, train.optimizer, ...).
bool names_component(const std::string& key) {
  return std::any_of(std::begin(kComponentSections), std::end(kComponentSections),
                     [&](const ComponentSection& section) { return key == section.path; });
}

}  // namespace

const char* to_string(SearchMethod method) { return option_word(method); }

namespace {

// sweep.search's values (the space, a mapping of parameters, is read by read_parameter) and its
// schedule's, as their option sets decode them; decode_search makes SearchSettings of them.
struct SearchOptions {
  SearchMethod method = SearchMethod::random;
  int64_t trials = 0;  // required unless method grid
  int64_t seed = 0;
  WatchedMetric metric = WatchedMetric::val_loss;
  int64_t confirm_repeats = 1;
  std::string time_budget;  // "2h"; empty: none
  int64_t parallel = 1;
};

struct ScheduleOptions {
  ScheduleKind name = ScheduleKind::none;
  int64_t grace_epochs = 1;
  int64_t reduction = 3;
  int64_t startup_trials = 5;
  int64_t interval_epochs = 1;
};

}  // namespace

template <>
struct OptionWords<ScheduleKind> {
  static constexpr std::pair<const char*, ScheduleKind> words[] = {
      {"successive-halving", ScheduleKind::successive_halving},
      {"asha", ScheduleKind::asha},
      {"median", ScheduleKind::median},
      {"none", ScheduleKind::none}};
};

const char* to_string(ScheduleKind kind) { return option_word(kind); }

const char* to_string(SearchCost cost) {
  switch (cost) {
    case SearchCost::train_seconds:
      return metric::kTrainSeconds;
    case SearchCost::time_to_target:
      return metric::kTimeToTarget;
    case SearchCost::none:
      break;
  }
  return "";
}

namespace {

const OptionSet<SearchOptions>& search_option_set() {
  static const OptionSet<SearchOptions> set = [] {
    OptionSet<SearchOptions> s;
    s.add("method", &SearchOptions::method,
          "grid (every combination of choice parameters), random, or tpe (Bayesian: the "
          "Tree-structured Parzen Estimator)")
        .add("trials", &SearchOptions::trials,
             "trials per variant; required, but with method grid, whose trials are every "
             "combination of its choices",
             between(1, 100000))
        .add("seed", &SearchOptions::seed, "the samplers' seed",
             between(0, 4611686018427387904.0))  // 2^62
        .add("metric", &SearchOptions::metric,
             "the validation figure trials are judged by: val_loss (lower is better), val_acc or "
             "val_f1 (macro-F1; higher is better); or two objectives, [val_acc, train_seconds] "
             "or [val_acc, time_to_target]: a Pareto front, the fastest reaching report.target "
             "confirmed")
        .add("confirm_repeats", &SearchOptions::confirm_repeats,
             "runs of each variant's best settings, on fresh seeds; 0: none", between(0, 100))
        .add("time_budget", &SearchOptions::time_budget,
             "no new trial once the study's trials have trained this long (2h, 90m, 1h30m), "
             "counted from the epochs' times the store holds, so a continued study stops where "
             "the first did; the trials proposed finish their rungs; empty: no budget")
        .add("parallel", &SearchOptions::parallel,
             "trials trained at once on this machine, each in a slot of its own with a share of "
             "the CPUs (runtime.threads 0 or idle); TPE proposes beside the pending ones as "
             "Optuna's constant liar does",
             between(1, 64));
    return s;
  }();
  return set;
}

const OptionSet<ScheduleOptions>& schedule_option_set() {
  static const OptionSet<ScheduleOptions> set = [] {
    OptionSet<ScheduleOptions> s;
    s.add("name", &ScheduleOptions::name,
          "successive-halving (synchronous: each rung decided once all its trials are in), asha "
          "(asynchronous: a trial goes on as soon as it is in its rung's best 1/reduction), "
          "median (a trial is paused at a check when worse than the completed trials' median), "
          "or none (every trial trains to the end)")
        .add("grace_epochs", &ScheduleOptions::grace_epochs,
             "the first rung or check: epochs every trial trains", between(1, 10000))
        .add("reduction", &ScheduleOptions::reduction,
             "successive-halving, asha: 1/reduction of a rung's trials go on", between(2, 100))
        .add("startup_trials", &ScheduleOptions::startup_trials,
             "median: trials that train to the end before any is judged", between(1, 100000))
        .add("interval_epochs", &ScheduleOptions::interval_epochs,
             "median: epochs between checks after grace_epochs", between(1, 10000));
    return s;
  }();
  return set;
}

// Where to point at when `search` says nothing more precise.
Origin first_origin(const ConfigTree& search) {
  return search.entries().empty() ? Origin{} : search.entries().front().second.origin;
}

// sweep.search.space: its parameters, in the file's order, each setting a run's setting once.
std::vector<SearchParameter> read_space(const ConfigTree& search, Diagnostics& diagnostics) {
  std::vector<SearchParameter> space;
  const ConfigTree section = search.subtree("space");
  if (section.empty())
    diagnostics.error(first_origin(search),
                      "'sweep.search.space' is missing: the settings to search, e.g. "
                      "train.optimizer.lr: {log_uniform: [1.0e-5, 1.0e-2]}");
  for (const auto& [key, value] : section.entries()) {
    std::vector<SearchParameter> read = read_parameter(key, value, diagnostics);
    if (read.empty()) continue;
    const int choice = static_cast<int>(space.size());
    for (size_t k = 1; k < read.size(); ++k) read[k].parent = choice;
    auto parameter = read.begin();
    const std::string run_section = split(parameter->key, '.').front();
    if (std::find(kRunSections.begin(), kRunSections.end(), run_section) == kRunSections.end()) {
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
    if (parameter->key == "train.epochs")
      diagnostics.error(parameter->origin,
                        "'train.epochs' in the space: trials are compared at the same epochs (the "
                        "file's train.epochs, or successive halving's rungs up to it); set it in "
                        "the file, or give each budget a variant of its own");
    for (const auto& other : space)
      if (other.key == parameter->key)
        diagnostics.error(parameter->origin,
                          fmt::format("'{}' is in the space twice", parameter->key));
    for (SearchParameter& each : read) space.push_back(std::move(each));
  }
  // A setting inside a chosen section: set twice when a choice writes it too.
  for (const SearchParameter& outer : space)
    for (const SearchParameter& inner : space) {
      if (&outer == &inner || !key_is_under(inner.key, outer.key) ||
          (inner.conditional() && &space[static_cast<size_t>(inner.parent)] == &outer))
        continue;
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
  return space;
}

// How many trials: sweep.search.trials, or with method grid every combination of the choices
// (which takes choice parameters only).
int64_t count_trials(const ConfigTree& search, const SearchOptions& options,
                     const std::vector<SearchParameter>& space, Diagnostics& diagnostics) {
  if (options.method != SearchMethod::grid) {
    if (search.find("trials") == nullptr)
      diagnostics.error(first_origin(search),
                        "'sweep.search.trials' is missing: how many trials each variant's study "
                        "runs (e.g. 24)");
    return std::max<int64_t>(options.trials, 1);
  }
  double combinations = 1;
  for (const auto& parameter : space) {
    if (parameter.conditional()) {
      diagnostics.error(
          parameter.origin,
          fmt::format(
              "method grid with a conditional space: '{}' is a prior "
              "inside a branch of a choice; search it with method random "
              "or tpe",
              parameter.key + "." + kDistributions[static_cast<size_t>(parameter.distribution)]));
      continue;
    }
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
  return static_cast<int64_t>(std::min(combinations, 1e12));
}

// sweep.search.metric as a list: [val_loss | val_acc | val_f1, train_seconds | time_to_target].
std::optional<std::pair<WatchedMetric, SearchCost>> read_objectives(const ConfigValue& value,
                                                                    Diagnostics& diagnostics) {
  const YAML::Node& list = value.node;
  std::optional<WatchedMetric> figure;
  if (list.size() == 2 && list[0].IsScalar())
    for (const auto& [word, metric] : OptionWords<WatchedMetric>::words)
      if (list[0].Scalar() == word) figure = metric;
  std::optional<SearchCost> cost;
  if (list.size() == 2 && list[1].IsScalar()) {
    if (list[1].Scalar() == metric::kTrainSeconds) cost = SearchCost::train_seconds;
    if (list[1].Scalar() == metric::kTimeToTarget) cost = SearchCost::time_to_target;
  }
  if (!figure || !cost) {
    diagnostics.error(value.origin,
                      fmt::format("'sweep.search.metric' {}: two objectives are a validation "
                                  "figure and a time, [val_loss | val_acc | val_f1, train_seconds "
                                  "| time_to_target] (several more are not built)",
                                  yaml_flow_text(list)));
    return std::nullopt;
  }
  return std::pair{*figure, *cost};
}

// sweep.search.schedule: none (also as a word), or a mapping of the schedule's options.
StudySchedule read_schedule(const ConfigTree& search, Diagnostics& diagnostics) {
  if (const ConfigValue* value = search.find("schedule")) {
    std::string word, expected;
    if (!decode_value(value->node, word, expected) || word != "none")
      diagnostics.error(value->origin,
                        "'sweep.search.schedule' is none, or a mapping such as {name: asha, "
                        "grace_epochs: 1, reduction: 3}");
    return {};
  }
  const ConfigTree schedule = search.subtree("schedule");
  if (schedule.empty()) return {};
  if (const ConfigValue* name = schedule.find("name"); name && name->node.IsScalar()) {
    const std::string word = name->node.Scalar();
    if (word == "hyperband") {
      diagnostics.error(name->origin,
                        "'sweep.search.schedule.name' hyperband: not built yet (its brackets are "
                        "successive halving at several grace_epochs); asha, successive-halving, "
                        "median or none");
      return {};
    }
  }
  const ScheduleOptions options = schedule_option_set().decode(schedule, "sweep.search.schedule",
                                                               "section 'sweep.search.schedule'",
                                                               first_origin(schedule), diagnostics);
  if (schedule.find("name") == nullptr)
    diagnostics.error(schedule.entries().front().second.key_origin,
                      "'sweep.search.schedule.name' is asha, successive-halving, median or none");
  // A key another schedule reads is said to be that schedule's, not silently ignored.
  const bool halves =
      options.name == ScheduleKind::successive_halving || options.name == ScheduleKind::asha;
  for (const auto& [key, halving_key] : {std::pair<const char*, bool>{"reduction", true},
                                         {"startup_trials", false},
                                         {"interval_epochs", false}}) {
    const ConfigValue* value = schedule.find(key);
    const bool applies = halving_key ? halves : options.name == ScheduleKind::median;
    if (value && !applies && options.name != ScheduleKind::none)
      diagnostics.error(value->key_origin,
                        fmt::format("'sweep.search.schedule.{}' is {}'s; schedule {} does not "
                                    "read it: remove it",
                                    key, halving_key ? "successive-halving and asha" : "median",
                                    to_string(options.name)));
  }
  return {.kind = options.name,
          .grace_epochs = options.grace_epochs,
          .reduction = options.reduction,
          .startup_trials = options.startup_trials,
          .interval_epochs = options.interval_epochs};
}

}  // namespace

std::optional<SearchSettings> decode_search(const ConfigTree& sweep, size_t variants,
                                            int64_t max_runs, Diagnostics& diagnostics) {
  const ConfigTree search = sweep.subtree("search");
  if (const ConfigValue* scalar = sweep.find("search")) {
    diagnostics.error(scalar->origin,
                      "'sweep.search' must be a mapping: method, trials, seed, space, metric, "
                      "schedule, confirm_repeats");
    return std::nullopt;
  }
  if (search.empty()) return std::nullopt;
  for (const char* other : {"grid", "repeats"})
    if (const ConfigValue* value = sweep.find(other); value || !sweep.subtree(other).empty())
      diagnostics.error(value ? value->key_origin : search.entries().front().second.key_origin,
                        std::string(other) == "grid"
                            ? "'sweep.grid' and 'sweep.search' together: a search's space "
                              "replaces the grid (method: grid with choice parameters is one)"
                            : "'sweep.repeats' and 'sweep.search' together: the best settings "
                              "run sweep.search.confirm_repeats times");
  // Choosing by the test split is refused with its reason, not as an unknown word.
  std::vector<std::string> read_apart = {"space", "schedule"};
  if (const ConfigValue* value = search.find("metric");
      value && value->node.IsScalar() && value->node.Scalar().rfind("test", 0) == 0) {
    diagnostics.error(value->origin,
                      "'sweep.search.metric' " + value->node.Scalar() +
                          ": choosing settings by the test split would make its figures "
                          "optimistic; search by val_loss, val_acc or val_f1");
    read_apart.push_back("metric");
  }
  // Two objectives: [a validation figure, a time].
  std::optional<std::pair<WatchedMetric, SearchCost>> objectives;
  if (const ConfigValue* value = search.find("metric"); value && value->node.IsSequence()) {
    objectives = read_objectives(*value, diagnostics);
    read_apart.push_back("metric");
  }
  if (const ConfigValue* value = search.find("trials"); value && value->node.IsNull()) {
    diagnostics.error(value->origin,
                      "'sweep.search.trials' has no value: how many trials each variant's study "
                      "runs (e.g. 24)");
    read_apart.push_back("trials");
  }
  // What was refused above is not decoded again (one message each).
  ConfigTree decoded = search;
  for (const std::string& key : read_apart)
    if (key != "space" && key != "schedule") decoded.erase(key);
  const SearchOptions options =
      search_option_set().decode(decoded, "sweep.search", "section 'sweep.search'",
                                 first_origin(search), diagnostics, read_apart);
  double budget = 0;
  if (!options.time_budget.empty()) {
    const std::optional<double> seconds = parse_duration(options.time_budget);
    if (!seconds || *seconds <= 0)
      diagnostics.error(search.find("time_budget")->origin,
                        fmt::format("'sweep.search.time_budget' {} is not a duration; write it "
                                    "as 2h, 90m, 1h30m or 45s",
                                    options.time_budget));
    else
      budget = *seconds;
  }

  SearchSettings settings;
  settings.method = options.method;
  settings.seed = static_cast<uint64_t>(options.seed);
  settings.metric = options.metric;
  if (objectives) std::tie(settings.metric, settings.cost) = *objectives;
  settings.confirm_repeats = options.confirm_repeats;
  settings.time_budget_seconds = budget;
  settings.parallel = options.parallel;
  for (const auto& [key, value] : search.entries())
    settings.text += key + "=" + yaml_flow_text(value.node) + "\n";
  settings.space = read_space(search, diagnostics);
  settings.trials = count_trials(search, options, settings.space, diagnostics);
  if (static_cast<double>(settings.trials) * static_cast<double>(variants) >
      static_cast<double>(max_runs)) {
    const ConfigValue* where = search.find("trials");
    diagnostics.error(where ? where->origin : first_origin(search),
                      fmt::format("the search runs {} trials x {} variant(s), more than the limit "
                                  "of {}; fewer trials, or raise the limit with --max-runs N",
                                  settings.trials, variants, max_runs));
  }
  settings.schedule = read_schedule(search, diagnostics);
  // A trial's time beside another's measures both.
  if (settings.parallel > 1 && settings.cost != SearchCost::none)
    diagnostics.error(
        search.find("parallel")->origin,
        fmt::format("'sweep.search.parallel' {} with the objective {}: a trial's time "
                    "side by side with another's would measure both; parallel 1 "
                    "for a time objective",
                    settings.parallel, to_string(settings.cost)));
  // ASHA's promotions and the median pruner's judgements follow the order trials finish in.
  if (settings.parallel > 1 && (settings.schedule.kind == ScheduleKind::asha ||
                                settings.schedule.kind == ScheduleKind::median))
    diagnostics.error(search.find("parallel")->origin,
                      fmt::format("'sweep.search.parallel' {} with schedule {}: not built (its "
                                  "decisions would follow the order trials finish in, and a study "
                                  "must replay); use successive-halving or none with parallel",
                                  settings.parallel, to_string(settings.schedule.kind)));
  if (settings.cost != SearchCost::none && settings.schedule.on())
    diagnostics.error(search.find("metric")->origin,
                      fmt::format("'sweep.search.metric' with two objectives and schedule {}: "
                                  "pausing trials by a Pareto front is not built; remove the "
                                  "schedule (every trial trains to the end) or search by one "
                                  "metric",
                                  to_string(settings.schedule.kind)));
  return settings;
}

std::vector<OptionInfo> describe_search_options() {
  std::vector<OptionInfo> options;
  for (OptionInfo info : search_option_set().describe()) {
    if (info.key == "trials") info.default_value = "";  // required (but with grid)
    info.key = "search." + info.key;
    options.push_back(std::move(info));
  }
  options.push_back({"search.space", "map", "", "",
                     "setting -> prior: {uniform: [low, high]}, {log_uniform: [low, high]}, "
                     "{int_uniform: [low, high]} or {choice: [a, b, ...]}; a choice's mapping "
                     "may hold priors of its own, drawn when it is chosen (a conditional space)"});
  options.push_back({"search.schedule", "map", "none", "",
                     "none, or {name: asha, grace_epochs: 1, reduction: 3}, {name: "
                     "successive-halving, ...} or {name: median, grace_epochs: 1, "
                     "startup_trials: 5, interval_epochs: 1}"});
  for (OptionInfo info : schedule_option_set().describe()) {
    info.key = "search.schedule." + info.key;
    options.push_back(std::move(info));
  }
  return options;
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

TrialValues lowest_values(const std::vector<SearchParameter>& space) {
  TrialValues values;
  for (const auto& parameter : space)
    values.push_back(parameter.distribution == Distribution::choice ? 0 : parameter.low);
  for (size_t i = 0; i < space.size(); ++i)
    if (space[i].conditional() && space[i].branch != 0) values[i] = NAN;
  return values;
}

void choose_branch(const std::vector<SearchParameter>& space, TrialValues& values, size_t choice,
                   size_t branch) {
  values.at(choice) = static_cast<double>(branch);
  for (size_t i = 0; i < space.size(); ++i)
    if (space[i].parent == static_cast<int>(choice))
      values[i] = space[i].branch == branch
                      ? (space[i].distribution == Distribution::choice ? 0 : space[i].low)
                      : NAN;
}

bool is_conditional(const std::vector<SearchParameter>& space) {
  return std::any_of(space.begin(), space.end(),
                     [](const SearchParameter& p) { return p.conditional(); });
}

std::string parameter_label(const std::vector<SearchParameter>& space, size_t i) {
  const SearchParameter& p = space.at(i);
  if (!p.conditional()) return p.key;
  const YAML::Node branch = space.at(static_cast<size_t>(p.parent)).choices.at(p.branch);
  const YAML::Node name = branch["name"];
  return fmt::format(
      "{} ({})", p.key,
      name && name.IsScalar() ? name.Scalar() : "branch " + std::to_string(p.branch));
}

YAML::Node chosen_value(const std::vector<SearchParameter>& space, const TrialValues& values,
                        size_t i) {
  YAML::Node value = parameter_value(space[i], values.at(i));
  if (space[i].distribution != Distribution::choice || !value.IsMap()) return value;
  value = YAML::Clone(value);  // the space's branch stays as written
  for (size_t k = i + 1; k < space.size(); ++k) {
    const SearchParameter& inner = space[k];
    if (inner.parent != static_cast<int>(i) || std::isnan(values.at(k))) continue;
    YAML::Node at = value;
    const std::vector<std::string> path = split(inner.path, '.');
    for (size_t d = 0; d + 1 < path.size(); ++d) at.reset(at[path[d]]);
    at[path.back()] = parameter_value(inner, values[k]);
  }
  return value;
}

ConfigTree trial_overrides(const std::vector<SearchParameter>& space, const TrialValues& values) {
  ConfigTree overrides;
  for (size_t i = 0; i < space.size(); ++i) {
    if (space[i].conditional()) continue;  // written by its choice's branch
    const YAML::Node value = parameter_value(space[i], values.at(i));
    // A mapping is written as a variant's `set:` writes one: flat, so that a section named with
    // options of its own is written afresh and a component's name swaps it (merge_layer). A
    // branch's priors are replaced by the trial's draws, each at its prior's place (what the run
    // refuses of it is said there).
    if (value.IsMap() && value.size() > 0) {
      flatten_into(overrides, value, space[i].origin.file, space[i].key);
      for (size_t k = i + 1; k < space.size(); ++k)
        if (space[k].parent == static_cast<int>(i) && !std::isnan(values.at(k)))
          overrides.set(space[i].key + "." + space[k].path,
                        {parameter_value(space[k], values[k]), space[k].origin, space[k].origin});
    } else if (names_component(space[i].key) && value.IsScalar())
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
    if (parameter.conditional()) continue;  // said with its choice's branch
    const YAML::Node proposed = chosen_value(space, values, i);
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
      for (const auto& [key, value] : written.entries()) {
        std::string text = read(key);
        double number = 0;
        std::string expected;
        // A number a branch's prior drew, to four digits as a range's is.
        if (text.find_first_of(".eE") != std::string::npos &&
            decode_value(YAML::Load(text), number, expected))
          text = fmt::format("{:.4g}", number);
        inner.push_back(key.substr(parameter.key.size() + 1) + ": " + text);
      }
      text = "{" + join(inner, ", ") + "}";
    } else {
      text = read(parameter.key + ".name");  // a component named by the choice
    }
    parts.push_back(split(parameter.key, '.').back() + "=" + text);
  }
  return join(parts, " ");
}

}  // namespace trainyard
