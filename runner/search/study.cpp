#include "runner/search/study.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "trainyard/options.h"

namespace trainyard {

namespace {

// A run the study resolves: validated when the file was loaded (every edge of the space), so a
// problem now is a bug, not the user's.
RunSpec resolve_checked(const Study& study, const TrialValues& values, const std::string& name,
                        int64_t repeat, std::optional<int64_t> seed) {
  Diagnostics found;
  std::vector<std::string> notes;
  RunSpec run = study.resolve(values, name, repeat, seed, found, notes);
  found.throw_if_any();
  return run;
}

}  // namespace

StudyKey study_key(const Experiment& experiment, const Study& study) {
  const RunSpec base =
      resolve_checked(study, lowest_values(study.search.space), study.variant, 0, {});
  return {experiment.name, study.variant,
          stable_hash(study.search.text + "\n" + study.variant + "\n" + base.config_hash)};
}

std::string trial_name(const Study& study, int64_t trial) {
  return fmt::format("{} trial {}", study.variant, trial);
}

RunSpec trial_run(const Study& study, int64_t trial, const TrialValues& values) {
  return resolve_checked(study, values, trial_name(study, trial), 0, {});
}

std::vector<RunSpec> confirmation_runs(const Study& study, const TrialValues& best) {
  std::vector<RunSpec> runs;
  const int64_t seed = trial_run(study, 0, best).train.seed;
  for (int64_t r = 0; r < study.search.confirm_repeats; ++r)
    runs.push_back(resolve_checked(study, best, study.variant, r, seed + 1 + r));
  return runs;
}

void add_confirmations(Experiment& experiment, Store& store) {
  for (const Study& study : experiment.studies)
    if (const auto outcome = store.study_outcome(study_key(experiment, study));
        outcome && outcome->best_trial)
      for (RunSpec& run : confirmation_runs(study, parse_values(outcome->values)))
        experiment.runs.push_back(std::move(run));
}

std::vector<RunSpec> study_edge_runs(const Experiment& experiment) {
  std::vector<RunSpec> runs;
  for (const Study& study : experiment.studies)
    runs.push_back(resolve_checked(study, lowest_values(study.search.space), study.variant, 0, {}));
  return runs;
}

std::string describe_studies(const Experiment& experiment) {
  if (experiment.studies.empty()) return "";
  const SearchSettings& search = experiment.studies.front().search;
  const std::string objectives =
      search.cost == SearchCost::none
          ? ""
          : fmt::format(" by {} and {} (a Pareto front)", metric_key(search.metric),
                        to_string(search.cost));
  return fmt::format(
      "{} of {} {} trials{}{}, then {} of {}",
      plural(static_cast<int64_t>(experiment.studies.size()), "study", "studies"), search.trials,
      to_string(search.method), objectives,
      search.schedule.on() ? fmt::format(" ({})", to_string(search.schedule.kind)) : "",
      plural(search.confirm_repeats, "run"),
      search.cost == SearchCost::none ? "each best" : "the settings each picks from its front");
}

std::vector<CurrentStudy> current_studies(const Experiment& experiment) {
  std::vector<CurrentStudy> studies;
  for (const Study& study : experiment.studies) {
    CurrentStudy current{.key = study_key(experiment, study),
                         .method = to_string(study.search.method),
                         .schedule = to_string(study.search.schedule.kind),
                         .cost = to_string(study.search.cost),
                         .metric = study.search.metric,
                         .confirm_repeats = study.search.confirm_repeats};
    for (size_t i = 0; i < study.search.space.size(); ++i) {
      const SearchParameter& p = study.search.space[i];
      CurrentStudy::Parameter parameter{.key = parameter_label(study.search.space, i),
                                        .log_scale = p.distribution == Distribution::log_uniform,
                                        .low = p.low,
                                        .high = p.high};
      // A branch with parameters of its own is named by its component's name ("sgd").
      const bool branches = std::any_of(
          study.search.space.begin(), study.search.space.end(),
          [&](const SearchParameter& inner) { return inner.parent == static_cast<int>(i); });
      for (const auto& choice : p.choices)
        parameter.choices.push_back(branches && choice.IsMap() && choice["name"] &&
                                            choice["name"].IsScalar()
                                        ? choice["name"].Scalar()
                                        : yaml_flow_text(choice));
      if (!p.choices.empty()) parameter.high = static_cast<double>(p.choices.size() - 1);
      current.parameters.push_back(std::move(parameter));
    }
    studies.push_back(std::move(current));
  }
  return studies;
}

std::string values_json(const TrialValues& values) {
  nlohmann::json list = nlohmann::json::array();
  for (double v : values)
    list.push_back(std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v));
  return list.dump();
}

TrialValues parse_values(const std::string& json) {
  TrialValues values;
  for (const auto& v : nlohmann::json::parse(json))
    values.push_back(v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
  return values;
}

double trial_figure(Store& store, int64_t run_id, int64_t epochs, bool last_rung,
                    const std::string& metric) {
  if (last_rung)
    if (const auto kept = kept_epoch(store, run_id)) return figure_at(store, run_id, *kept, metric);
  return figure_at(store, run_id, epochs, metric);
}

}  // namespace trainyard
