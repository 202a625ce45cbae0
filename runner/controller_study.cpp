// The controller's studies (sweep.search, docs/search.md): trials proposed one after another, each
// trained to the first rung as soon as it is proposed (so TPE sees every earlier trial's figure
// there), then successive halving's decisions, rung by rung, each trial promoted continuing from
// its paused checkpoint. Everything is read back from the store — a trial already trained to a
// rung is not trained again, a paused or interrupted one continues — so a study killed at any
// moment and started again proposes, decides and ends as an undisturbed one.
#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "runner/batch_records.h"
#include "runner/controller.h"
#include "runner/engine/engine.h"
#include "runner/search/halving.h"
#include "runner/search/samplers.h"

namespace trainyard {

namespace {

std::string figure_text(double figure, const std::string& metric) {
  if (!std::isfinite(figure)) return "failed";
  return metric == "val_acc" ? fmt::format("{:.2f}%", 100 * figure) : fmt::format("{:.4f}", figure);
}

nlohmann::json figure_json(double figure) {
  return std::isfinite(figure) ? nlohmann::json(figure) : nlohmann::json(nullptr);
}

}  // namespace

double Controller::train_trial(const Experiment& experiment, const Study& study,
                               const StudyKey& key, int64_t trial, const RunSpec& run,
                               const TrialValues& values, int64_t epochs, BatchSummary& summary) {
  const std::string& metric = study.search.metric;
  StudyTrialRow row{.trial = trial,
                    .values = values_json(values),
                    .settings = describe_values(study.search.space, values),
                    .config_hash = run.config_hash};
  auto record = [&](int64_t run_id, double figure) {
    row.run_id = run_id;
    row.epochs = epochs;
    if (std::isfinite(figure)) row.figure = figure;
    store_.record_study_trial(key, row);
    return figure;
  };
  // The runs of this trial's configuration, newest first: one that reached the rung already
  // (completed, or paused there or beyond) has its figure.
  std::vector<RunRecord> history;
  for (const RunRecord& r : store_.runs(experiment.name))
    if (r.config_hash == run.config_hash) history.insert(history.begin(), r);
  for (const RunRecord& r : history)
    if (const double figure = figure_at(store_, r.id, epochs, metric); !std::isnan(figure))
      return record(r.id, figure);
  const RunRecord* newest = history.empty() ? nullptr : &history.front();
  // One that failed for good counts as the worst; the study goes on.
  if (newest && newest->status == RunStatus::failed && !is_transient(newest->failure))
    return record(newest->id, NAN);
  if (const std::string why = resolve_device(run.runtime).unavailable_reason; !why.empty()) {
    const int64_t id = store_.queue_run(record_experiment(store_, experiment),
                                        queued_run(run, static_cast<size_t>(trial)));
    store_.end_run(id, RunStatus::skipped, why);
    ++summary.skipped;
    console_.line(fmt::format("- {}/{}: skipped: {}", experiment.name, run.variant, why));
    return record(id, NAN);
  }
  Planned planned{.experiment = &experiment,
                  .run = &run,
                  .run_id = 0,
                  .continues = false,
                  .ordinal = 0,
                  .pause_after_epochs = epochs < run.train.epochs ? epochs : 0};
  if (newest && (newest->status == RunStatus::interrupted || newest->status == RunStatus::failed ||
                 newest->status == RunStatus::queued || newest->status == RunStatus::running)) {
    store_.requeue_run(newest->id);
    planned.run_id = newest->id;
    planned.continues = !newest->environment.log_path.empty();
    planned.promoted = newest->error.rfind("paused after epoch", 0) == 0;
  } else {
    planned.run_id = store_.queue_run(record_experiment(store_, experiment),
                                      queued_run(run, static_cast<size_t>(trial)));
  }
  const std::string name = fmt::format("{}/{} to epoch {}{}", experiment.name, run.variant, epochs,
                                       planned.continues ? " (continues where it stopped)" : "");
  console_.start_run(static_cast<int>(trial + 1), static_cast<int>(study.search.trials), name);
  const auto start = std::chrono::steady_clock::now();
  execute(planned, summary);
  console_.end_run(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return record(planned.run_id, figure_at(store_, planned.run_id, epochs, metric));
}

bool Controller::run_study(const Experiment& experiment, const Study& study,
                           BatchSummary& summary) {
  const SearchSettings& search = study.search;
  const StudyKey key = study_key(experiment, study);
  const bool minimize = search.minimize();
  const int64_t epochs =
      trial_run(study, 0, propose_random(search.space, search.seed, 0)).train.epochs;
  const std::vector<int64_t> rungs = rung_epochs(search.schedule, epochs);
  console_.line(fmt::format("study {}/{}: {} {} trials by {}{}", experiment.name, study.variant,
                            search.trials, to_string(search.method), search.metric,
                            rungs.size() > 1
                                ? fmt::format(", successive halving at epochs {}",
                                              join(
                                                  [&] {
                                                    std::vector<std::string> words;
                                                    for (int64_t e : rungs)
                                                      words.push_back(std::to_string(e));
                                                    return words;
                                                  }(),
                                                  ", "))
                                : ""));
  auto stopped = [&] { return stop_requested_.load() || summary.interrupted; };

  // Every trial to the first rung, proposed from the figures of those before it.
  std::vector<TrialValues> values;
  std::vector<RunSpec> runs;
  std::vector<Observation> seen;
  for (int64_t i = 0; i < search.trials; ++i) {
    if (stopped()) return false;
    TrialValues proposal;
    switch (search.method) {
      case SearchMethod::grid:
        proposal = propose_grid(search.space, i);
        break;
      case SearchMethod::random:
        proposal = propose_random(search.space, search.seed, i);
        break;
      case SearchMethod::tpe:
        proposal = propose_tpe(search.space, search.seed, i, seen, minimize);
        break;
    }
    values.push_back(proposal);
    runs.push_back(trial_run(study, i, proposal));
    const double figure =
        train_trial(experiment, study, key, i, runs.back(), proposal, rungs[0], summary);
    if (stopped()) return false;
    seen.push_back({proposal, figure});
  }

  // Each rung's decision, once its cohort is complete; the promoted go on to the next rung.
  std::vector<int64_t> cohort(static_cast<size_t>(search.trials));
  for (size_t i = 0; i < cohort.size(); ++i) cohort[i] = static_cast<int64_t>(i);
  std::vector<double> figures;
  for (const Observation& o : seen) figures.push_back(o.value);
  for (size_t r = 0; r + 1 < rungs.size(); ++r) {
    const std::vector<int64_t> promoted =
        promote(cohort, figures, search.schedule.reduction, minimize);
    nlohmann::json evidence = nlohmann::json::array();
    for (size_t k = 0; k < cohort.size(); ++k)
      evidence.push_back({cohort[k], figure_json(figures[k])});
    store_.record_study_decision(key, {.rung = static_cast<int64_t>(r),
                                       .epochs = rungs[r],
                                       .evidence = evidence.dump(),
                                       .promoted = nlohmann::json(promoted).dump()});
    std::vector<std::string> names;
    for (int64_t t : promoted) names.push_back(std::to_string(t));
    console_.line(
        fmt::format("study {}/{}: rung {} (epoch {}): {} of {} go on to epoch {}: trial{} {}",
                    experiment.name, study.variant, r, rungs[r], promoted.size(), cohort.size(),
                    rungs[r + 1], promoted.size() == 1 ? "" : "s", join(names)));
    std::vector<double> next;
    for (int64_t t : promoted) {
      const auto i = static_cast<size_t>(t);
      next.push_back(
          train_trial(experiment, study, key, t, runs[i], values[i], rungs[r + 1], summary));
      if (stopped()) return false;
    }
    cohort = promoted;
    figures = next;
  }

  // The best of the last rung (ties: the earlier trial).
  size_t best = 0;
  for (size_t k = 1; k < cohort.size(); ++k)
    if (better_figure(figures[k], figures[best], minimize)) best = k;
  const auto best_trial = static_cast<size_t>(cohort[best]);
  StudyOutcomeRow outcome{.best_trial = cohort[best],
                          .values = values_json(values[best_trial]),
                          .settings = describe_values(search.space, values[best_trial])};
  if (std::isfinite(figures[best])) outcome.figure = figures[best];
  store_.record_study_outcome(key, outcome);
  console_.line(fmt::format("study {}/{}: best trial {} ({} {}): {}", experiment.name,
                            study.variant, best_trial, search.metric,
                            figure_text(figures[best], search.metric), outcome.settings));
  return true;
}

}  // namespace trainyard
