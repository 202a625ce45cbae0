// The controller's studies (sweep.search, docs/search.md): trials proposed one after another, each
// trained to the first rung as soon as it is proposed (so TPE sees every earlier trial's figure
// there), then successive halving's decisions, rung by rung, each trial promoted continuing from
// its paused checkpoint. Everything is read back from the store — a trial already trained to a
// rung is not trained again, a paused or interrupted one continues — so a study killed at any
// moment and started again proposes, decides and ends as an undisturbed one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

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
  return metric == "val_loss" ? fmt::format("{:.4f}", figure)
                              : fmt::format("{:.2f}%", 100 * figure);
}

nlohmann::json figure_json(double figure) {
  return std::isfinite(figure) ? nlohmann::json(figure) : nlohmann::json(nullptr);
}

}  // namespace

double Controller::train_trial(const Experiment& experiment, const Study& study,
                               const StudyKey& key, int64_t trial, const RunSpec& run,
                               const TrialValues& values, int64_t epochs, BatchSummary& summary) {
  const std::string& metric = study.search.metric;
  // The last rung is the run's end: its figure is that of the weights the run kept and tested.
  const bool last_rung = epochs >= run.train.epochs;
  StudyTrialRow row{.trial = trial,
                    .values = values_json(values),
                    .settings = describe_settings(study.search.space, values, run.config_yaml),
                    .config_hash = run.config_hash};
  // The trial's record goes forward only: a study walked again after a kill reads its rungs back
  // without taking the record of a trial that went further back to an earlier rung.
  auto record = [&](int64_t run_id, double figure) {
    std::optional<StudyTrialRow> before;
    for (const StudyTrialRow& r : store_.study_trials(key))
      if (r.trial == trial) before = r;
    if (before && before->epochs > epochs && before->run_id == run_id) return figure;
    row.run_id = run_id;
    row.epochs = epochs;
    if (std::isfinite(figure)) row.figure = figure;
    store_.record_study_trial(key, row);
    return figure;
  };
  // The runs of this trial's configuration, newest first. One that completed has reached every
  // rung (one that stopped early: its last epoch is where it stopped), one paused at or beyond
  // this rung has its figure here: never trained again. A figure missing there (a diverged loss
  // is not recorded) counts as the worst.
  std::vector<RunRecord> history;
  for (const RunRecord& r : store_.runs(experiment.name))
    if (r.config_hash == run.config_hash) history.insert(history.begin(), r);
  for (const RunRecord& r : history) {
    int64_t last = 0;
    for (const EpochRow& row : store_.epoch_metrics(r.id)) last = std::max(last, row.epoch);
    if (r.status == RunStatus::completed || last >= epochs)
      return record(r.id, trial_figure(store_, r.id, std::min(epochs, last), last_rung, metric));
  }
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
    planned.promoted = is_paused(*newest);
  } else {
    planned.run_id = store_.queue_run(record_experiment(store_, experiment),
                                      queued_run(run, static_cast<size_t>(trial)));
  }
  // Recorded before it trains: `trainyard status` shows the study live, a kill keeps its values.
  bool known = false;
  for (const StudyTrialRow& r : store_.study_trials(key)) known = known || r.trial == trial;
  if (!known) {
    StudyTrialRow first = row;
    first.run_id = planned.run_id;
    store_.record_study_trial(key, first);
  }
  const std::string name =
      fmt::format("{}/{} to epoch {}{}", experiment.name, run.variant, epochs,
                  planned.continues ? (planned.promoted ? " (promoted: continues from its pause)"
                                                        : " (continues where it stopped)")
                                    : "");
  console_.start_run(static_cast<int>(trial + 1), static_cast<int>(study.search.trials), name);
  const auto start = std::chrono::steady_clock::now();
  execute(planned, summary);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  training_seconds_ += seconds;
  console_.end_run(seconds);
  const double figure = trial_figure(store_, planned.run_id, epochs, last_rung, metric);
  // Stopped by Ctrl-C or --time-limit before the rung: no figure yet, the next batch trains it.
  if (std::isnan(figure) && (stop_requested_.load() || summary.interrupted)) return figure;
  return record(planned.run_id, figure);
}

bool Controller::run_study(const Experiment& experiment, const Study& study,
                           BatchSummary& summary) {
  const auto study_start = std::chrono::steady_clock::now();
  training_seconds_ = 0;
  // The controller's own work per trial (proposing, resolving, reading and writing the store):
  // what a study of thousands of trials adds to their training (bench/search/README.md).
  auto own_work = [&] {
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - study_start).count();
    return fmt::format("the controller's own work: {:.1f} ms a trial",
                       1000 * (total - training_seconds_) /
                           static_cast<double>(std::max<int64_t>(1, study.search.trials)));
  };
  const SearchSettings& search = study.search;
  const StudyKey key = study_key(experiment, study);
  const bool minimize = search.minimize();
  const int64_t epochs =
      trial_run(study, 0, propose_random(search.space, search.seed, 0)).train.epochs;
  const std::vector<int64_t> rungs = rung_epochs(search.schedule, epochs);
  std::vector<std::string> rung_words;
  for (int64_t e : rungs) rung_words.push_back(std::to_string(e));
  console_.line(fmt::format(
      "study {}/{}: {} {} trials by {}{}", experiment.name, study.variant, search.trials,
      to_string(search.method), search.metric,
      rungs.size() > 1 ? ", successive halving at epochs " + join(rung_words, ", ") : ""));
  auto stopped = [&] {
    return stop_requested_.load() || summary.interrupted || summary.stopped_on_failure;
  };
  // A trial's values, once recorded, are its own: a study continued after a kill or a transient
  // failure trains what it proposed, whatever a figure that came later would now suggest.
  std::map<int64_t, TrialValues> recorded;
  for (const StudyTrialRow& row : store_.study_trials(key))
    recorded[row.trial] = parse_values(row.values);

  // Every trial to the first rung, proposed from the figures of those before it.
  std::vector<TrialValues> values;
  std::vector<RunSpec> runs;
  std::vector<Observation> seen;
  for (int64_t i = 0; i < search.trials; ++i) {
    if (stopped()) return false;
    TrialValues proposal;
    if (auto it = recorded.find(i); it != recorded.end()) {
      proposal = it->second;
    } else {
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
    }
    values.push_back(proposal);
    runs.push_back(trial_run(study, i, proposal));
    const double figure =
        train_trial(experiment, study, key, i, runs.back(), proposal, rungs[0], summary);
    if (stopped()) return false;
    seen.push_back({proposal, figure});
  }

  // Each rung's decision, once its cohort is complete; the promoted go on to the next rung. A
  // trial whose settings an earlier trial already has is that trial: it takes no place of its own.
  std::vector<int64_t> cohort;
  std::vector<double> figures;
  std::map<std::string, size_t> first_of;  // a configuration's first trial
  std::vector<std::string> repeated;       // "4 = 1": trials that an earlier one already trained
  for (size_t i = 0; i < runs.size(); ++i)
    if (const auto [it, fresh] = first_of.emplace(runs[i].config_hash, i); fresh) {
      cohort.push_back(static_cast<int64_t>(i));
      figures.push_back(seen[i].value);
    } else {
      repeated.push_back(fmt::format("{} = {}", i, it->second));
    }
  if (!repeated.empty())
    console_.line(fmt::format(
        "study {}/{}: {} trained of {} trials proposed (trial {}: the same resolved config, "
        "trained once; they count toward sweep.search.trials)",
        experiment.name, study.variant,
        plural(static_cast<int64_t>(cohort.size()), "distinct configuration"), runs.size(),
        join(repeated)));
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

  // The best of the last rung (ties: the earlier trial); a study whose every trial there failed
  // has none, and its variant no settings to confirm.
  std::optional<size_t> best;
  for (size_t k = 0; k < cohort.size(); ++k)
    if (std::isfinite(figures[k]) && (!best || better_figure(figures[k], figures[*best], minimize)))
      best = k;
  if (!best) {
    console_.line(fmt::format(
        "study {}/{}: no trial reached a {} at epoch {} (each failed or diverged): no best "
        "settings, so no runs of them; the trials' logs say why",
        experiment.name, study.variant, search.metric, rungs.back()));
    return true;
  }
  const auto best_trial = static_cast<size_t>(cohort[*best]);
  StudyOutcomeRow outcome{.best_trial = cohort[*best],
                          .figure = figures[*best],
                          .values = values_json(values[best_trial]),
                          .settings = describe_settings(search.space, values[best_trial],
                                                        runs[best_trial].config_yaml)};
  store_.record_study_outcome(key, outcome);
  // The figure as the trial's own run states it: of the epoch whose weights it tested.
  std::string where;
  for (const StudyTrialRow& row : store_.study_trials(key))
    if (row.trial == cohort[*best])
      if (const auto kept = kept_epoch(store_, row.run_id)) {
        int64_t last = 0;
        for (const EpochRow& epoch : store_.epoch_metrics(row.run_id))
          last = std::max(last, epoch.epoch);
        if (*kept != last)
          where = fmt::format(" at epoch {} of {}, whose weights its run tested", *kept, last);
      }
  console_.line(fmt::format("study {}/{}: best trial {} ({} {}{}): {} ({})", experiment.name,
                            study.variant, best_trial, search.metric,
                            figure_text(figures[*best], search.metric), where, outcome.settings,
                            own_work()));
  return true;
}

}  // namespace trainyard
