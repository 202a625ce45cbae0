// sweep.search: a study per variant over a space of settings (docs/search.md) — how trials are
// proposed (grid, random, tpe), how many, which validation figure they are judged by, which
// schedule pauses the worse ones (successive halving, asha, median), and how often the best
// settings run again. Read and checked here; proposing is runner/search/, running the studies the
// StudyRunner's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/metrics.h"
#include "trainyard/config_tree.h"
#include "trainyard/diagnostics.h"
#include "trainyard/options.h"

namespace trainyard {

enum class SearchMethod { grid, random, tpe };
template <>
struct OptionWords<SearchMethod> {
  static constexpr std::pair<const char*, SearchMethod> words[] = {
      {"grid", SearchMethod::grid}, {"random", SearchMethod::random}, {"tpe", SearchMethod::tpe}};
};
const char* to_string(SearchMethod method);

// A parameter's prior: uniform or log-uniform between two numbers, whole numbers between two
// (inclusive), or one of a list of values.
enum class Distribution { uniform, log_uniform, int_uniform, choice };

// A conditional space: a choice of mappings whose values hold priors of their own,
//   train.optimizer: {choice: [{name: adamw, lr: {log_uniform: [1e-4, 1e-2]}}, {name: sgd, ...}]}
// is the choice (its `choices` the branches as written, priors and all) followed in the space by
// one parameter per prior of each branch, which is drawn only when its branch is chosen.
struct SearchParameter {
  std::string key;  // the setting it sets, as --set names it: "train.optimizer.lr"
  Distribution distribution = Distribution::uniform;
  double low = 0, high = 0;         // uniform, log_uniform, int_uniform
  std::vector<YAML::Node> choices;  // choice
  Origin origin;                    // where the parameter is written
  // A branch's parameter: the choice it belongs to (its index in the space), the branch, and
  // where inside the branch's mapping its prior is ("lr"). -1: a parameter of its own.
  int parent = -1;
  size_t branch = 0;
  std::string path{};
  bool conditional() const { return parent >= 0; }
};

// A trial's values, one per parameter of the space, in the space's order: the number itself, or
// for a choice the index of the value chosen; NaN for a branch's parameter whose branch was not
// chosen.
using TrialValues = std::vector<double>;

// Every parameter at its lower end (a choice: its first value; the parameters of the branches
// not chosen NaN).
TrialValues lowest_values(const std::vector<SearchParameter>& space);
// `values` with choice `choice` at `branch`: that branch's parameters at their lower ends, the
// other branches' NaN.
void choose_branch(const std::vector<SearchParameter>& space, TrialValues& values, size_t choice,
                   size_t branch);
// Whether the space has a conditional part (a choice with priors in its branches).
bool is_conditional(const std::vector<SearchParameter>& space);
// A parameter's label for the report: its key, with the branch for a branch's ("lr (sgd)").
std::string parameter_label(const std::vector<SearchParameter>& space, size_t i);

// sweep.search.schedule: how a study spends its epochs (docs/search.md). Every schedule pauses a
// trial it stops, with its checkpoint kept, never kills it.
//   successive-halving: synchronous (Jamieson and Talwalkar; Li et al.'s Hyperband bracket): a
//     rung's decision waits for every trial to reach it, then the best 1/reduction go on.
//   asha: asynchronous (Li et al., MLSys 2020): a trial goes on as soon as it is in the best
//     1/reduction of those that reached its rung so far; a paused one can still go on later.
//   median: Optuna's MedianPruner: at each check a trial goes on unless its best figure so far is
//     worse than the median of the completed trials' figures at that epoch.
enum class ScheduleKind { none, successive_halving, asha, median };
const char* to_string(ScheduleKind kind);

struct StudySchedule {
  ScheduleKind kind = ScheduleKind::none;  // none: every trial trains every epoch
  int64_t grace_epochs = 1;     // every trial trains this many epochs before any is paused
  int64_t reduction = 3;        // successive-halving, asha: 1/reduction of a rung's trials go on
  int64_t startup_trials = 5;   // median: trials that complete before any is judged
  int64_t interval_epochs = 1;  // median: epochs between checks, after grace_epochs
  bool on() const { return kind != ScheduleKind::none; }
};

// sweep.search.metric's second objective, when it is a list ([val_acc, train_seconds]): a time,
// lower is better, as the report's verdicts measure it — the run's training time, or its time to
// report.target (infinite for a trial that never reached it).
enum class SearchCost { none, train_seconds, time_to_target };
const char* to_string(SearchCost cost);

struct SearchSettings {
  SearchMethod method = SearchMethod::random;
  int64_t trials = 0;  // per variant (grid: every combination of the choices)
  uint64_t seed = 0;
  std::vector<SearchParameter> space;              // in the file's order
  WatchedMetric metric = WatchedMetric::val_loss;  // what trials are decided by
  bool minimize() const { return lower_is_better(metric); }
  // A second objective: trials form a Pareto front of metric and cost; the settings confirmed
  // are picked from it (runner/study_runner.h). none: one objective.
  SearchCost cost = SearchCost::none;
  StudySchedule schedule{};
  int64_t confirm_repeats = 1;  // runs of each variant's best settings, on fresh seeds
  // sweep.search.time_budget: no new trial is proposed once the study's trials have trained this
  // long, by the epochs' times the store holds (so a continued study stops where the first did).
  // 0: no budget.
  double time_budget_seconds = 0;
  // sweep.search.parallel: trials trained at once, each in a slot of its own on this machine.
  // Trial i is proposed once trial i - parallel has its figure, TPE counting the trials still
  // training as the worst figure so far (Optuna's constant liar): the same trials whatever order
  // they finish in.
  int64_t parallel = 1;
  std::string text;  // the section as written, in key order: part of a study's identity
};

// The study settings of `sweep` (the section without its prefix); nullopt when it has no search.
// `max_runs` bounds trials x variants as it bounds a grid.
std::optional<SearchSettings> decode_search(const ConfigTree& sweep, size_t variants,
                                            int64_t max_runs, Diagnostics& diagnostics);
// sweep.search's keys, "search." first, for `trainyard list sweep` (describe_sweep_options).
std::vector<OptionInfo> describe_search_options();

// The setting a trial gives one parameter, as YAML (a choice's value; a whole number for
// int_uniform).
YAML::Node parameter_value(const SearchParameter& parameter, double value);
// The setting a trial gives parameter `i`: parameter_value, but for a conditional choice, its
// chosen branch with each prior replaced by the trial's value for it.
YAML::Node chosen_value(const std::vector<SearchParameter>& space, const TrialValues& values,
                        size_t i);
// The overrides a trial adds to its variant, each with the origin of its parameter, written as a
// variant's `set:` writes the same values: a mapping flat (a section named with options of its own
// is written afresh, a component's name alone swaps it, keeping the options it declares), a
// component's name as its section's name.
ConfigTree trial_overrides(const std::vector<SearchParameter>& space, const TrialValues& values);
// "lr=0.00031 batch_size=64 optimizer={name: sgd, lr: 0.05}": a trial's settings for messages,
// the store and the report, each read back from the run's resolved config (`config_yaml`), not
// from the proposal: what a study says it tried is what its run trained. A range's number to four
// digits; a chosen mapping as the keys it writes, each with the run's value.
std::string describe_settings(const std::vector<SearchParameter>& space, const TrialValues& values,
                              const std::string& config_yaml);

}  // namespace trainyard
