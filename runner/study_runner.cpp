// A study run to its outcome (runner/study_runner.h): run() is its schedule's walk (successive
// halving: train_first_rung then climb_rungs; run_asha; run_median) and record_best; train_trial
// trains one trial to one rung through the batch's RunExecutor.
#include "runner/study_runner.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/text.h"
#include "reports/statistics.h"
#include "runner/batch_records.h"
#include "runner/engine/engine.h"
#include "runner/search/halving.h"

namespace trainyard {

namespace {

std::string figure_or_failed(WatchedMetric metric, double figure) {
  return std::isfinite(figure) ? figure_text(metric, figure) : "failed";
}

nlohmann::json figure_json(double figure) {
  return std::isfinite(figure) ? nlohmann::json(figure) : nlohmann::json(nullptr);
}

// [[trial, figure or null], ...]: a decision's evidence.
std::string evidence_json(const std::vector<int64_t>& trials, const std::vector<double>& figures) {
  nlohmann::json evidence = nlohmann::json::array();
  for (size_t k = 0; k < trials.size(); ++k)
    evidence.push_back({trials[k], figure_json(figures[k])});
  return evidence.dump();
}

// The best of a run's figures of `metric` up to `epoch` (NaN: none): what Optuna's MedianPruner
// judges a trial by.
double best_figure_by(Store& store, int64_t run_id, int64_t epoch, const std::string& metric,
                      bool minimize) {
  double best = NAN;
  for (const EpochRow& row : store.epoch_metrics(run_id))
    if (const auto it = row.values.find(metric); row.epoch <= epoch && it != row.values.end())
      if (better_figure(it->second, best, minimize)) best = it->second;
  return best;
}

}  // namespace

StudyRunner::StudyRunner(Store& store, RunExecutor& executor, BatchConsole& console,
                         const std::atomic<bool>& stop_requested, const Experiment& experiment,
                         const Study& study, BatchSummary& summary)
    : store_(store),
      executor_(executor),
      console_(console),
      stop_requested_(stop_requested),
      experiment_(experiment),
      study_(study),
      search_(study.search),
      summary_(summary),
      start_(std::chrono::steady_clock::now()),
      key_(study_key(experiment, study)) {}

bool StudyRunner::run() {
  const int64_t epochs =
      trial_run(study_, 0, propose_random(search_.space, search_.seed, 0)).train.epochs;
  rungs_ = rung_epochs(search_.schedule, epochs);
  std::vector<std::string> rung_words;
  for (int64_t e : rungs_) rung_words.push_back(std::to_string(e));
  const ScheduleKind schedule = search_.schedule.kind;
  console_.line(fmt::format(
      "study {}/{}: {} {} trials by {}{}{}", experiment_.name, study_.variant, search_.trials,
      to_string(search_.method), metric_key(search_.metric),
      search_.cost == SearchCost::none
          ? ""
          : fmt::format(" and {} (a Pareto front)", to_string(search_.cost)),
      rungs_.size() > 1 ? fmt::format(", {} {} epochs {}", to_string(schedule),
                                      schedule == ScheduleKind::median ? "checking at" : "rungs at",
                                      join(rung_words, ", "))
                        : ""));
  // A trial's values, once recorded, are its own: a study continued after a kill or a transient
  // failure trains what it proposed, whatever a figure that came later would now suggest.
  for (const StudyTrialRow& row : store_.study_trials(key_))
    recorded_[row.trial] = parse_values(row.values);
  // An end with no best trial is not kept while the study runs again (its crashed trials train
  // again): the status, the report and the trackers see it searching; the walk records its end.
  if (const auto outcome = store_.study_outcome(key_); outcome && !outcome->best_trial)
    store_.forget_study_outcome(key_);
  // Trials side by side: slots of their own, ended with the study (their engines with them).
  if (search_.parallel > 1)
    slots_ =
        std::make_unique<TrialSlots>(executor_, store_.path(), static_cast<int>(search_.parallel));
  bool ended = false;
  switch (schedule) {
    case ScheduleKind::none:
    case ScheduleKind::successive_halving:
      ended = train_first_rung() && climb_rungs();
      break;
    case ScheduleKind::asha:
      ended = run_asha();
      break;
    case ScheduleKind::median:
      ended = run_median();
      break;
  }
  if (ended) record_best();
  // The slots' trackers send once more, the outcome recorded: a study's trials are sent with
  // its best trial known.
  if (slots_) {
    slots_->finish();
    slots_.reset();
  }
  return ended;
}

bool StudyRunner::stopped() const {
  return stop_requested_.load() || summary_.interrupted || summary_.stopped_on_failure;
}

std::string StudyRunner::own_work() const {
  return fmt::format("the controller's own work: {:.1f} ms a trial",
                     1000 * (seconds_since(start_) - training_seconds_) /
                         static_cast<double>(std::max<int64_t>(1, search_.trials)));
}

bool StudyRunner::add_trial(int64_t trial) {
  TrialValues proposal;
  if (const auto it = recorded_.find(trial); it != recorded_.end()) {
    proposal = it->second;
  } else if (out_of_budget(trial)) {
    return false;
  } else {
    switch (search_.method) {
      case SearchMethod::grid:
        proposal = propose_grid(search_.space, trial);
        break;
      case SearchMethod::random:
        proposal = propose_random(search_.space, search_.seed, trial);
        break;
      case SearchMethod::tpe:
        proposal = propose_tpe(search_.space, search_.seed, trial, observations_for(trial),
                               search_.minimize(), search_.cost != SearchCost::none);
        break;
    }
  }
  values_.push_back(proposal);
  runs_.push_back(trial_run(study_, trial, proposal));
  return true;
}

std::vector<Observation> StudyRunner::observations_for(int64_t trial) const {
  // The trials that have their figure by the rule (trial - parallel and before, in order), then
  // those still training, each as the worst figure (and time) so far: Optuna's constant liar.
  const auto known = static_cast<size_t>(
      std::clamp<int64_t>(trial - search_.parallel + 1, 0, static_cast<int64_t>(seen_.size())));
  std::vector<Observation> observations(seen_.begin(), seen_.begin() + static_cast<long>(known));
  Observation liar{.values = {}, .value = NAN, .cost = NAN};
  for (const Observation& o : observations) {
    if (std::isfinite(o.value) &&
        (std::isnan(liar.value) || better_figure(liar.value, o.value, search_.minimize())))
      liar.value = o.value;
    if (!std::isnan(o.cost) && (std::isnan(liar.cost) || o.cost > liar.cost)) liar.cost = o.cost;
  }
  for (auto k = static_cast<int64_t>(known); k < trial; ++k) {
    liar.values = values_[static_cast<size_t>(k)];
    observations.push_back(liar);
  }
  return observations;
}

bool StudyRunner::repeats_earlier(int64_t trial) const {
  const auto i = static_cast<size_t>(trial);
  for (size_t k = 0; k < i; ++k)
    if (runs_[k].config_hash == runs_[i].config_hash) return true;
  return false;
}

bool StudyRunner::train_first_rung() {
  if (slots_) return train_first_rung_side_by_side();
  for (int64_t i = 0; i < search_.trials; ++i) {
    if (stopped()) return false;
    if (!add_trial(i)) break;
    const double figure = train_trial(i, rungs_[0]);
    if (stopped()) return false;
    seen_.push_back({.values = values_.back(),
                     .value = figure,
                     .cost = search_.cost == SearchCost::none ? 0 : trial_cost(i)});
  }
  return true;
}

bool StudyRunner::train_first_rung_side_by_side() {
  // In trial order: each one's job, and its slot's ticket when it trains.
  struct Pending {
    TrialJob job;
    std::optional<int64_t> ticket;
    std::chrono::steady_clock::time_point start{};  // for the console's ETA
  };
  std::deque<Pending> pending;
  auto collect_oldest = [&] {
    Pending p = std::move(pending.front());
    pending.pop_front();
    double figure = p.job.figure.value_or(NAN);
    if (p.ticket) {
      const auto waiting = std::chrono::steady_clock::now();
      slots_->wait(*p.ticket, summary_);
      training_seconds_ += seconds_since(waiting);  // (the controller's own work is the rest)
      console_.end_run(seconds_since(p.start));
      figure = finish_trial(p.job);
    }
    const auto trial = static_cast<size_t>(p.job.trial);
    seen_.push_back({.values = values_[trial],
                     .value = figure,
                     .cost = search_.cost == SearchCost::none ? 0 : trial_cost(p.job.trial)});
  };
  bool ended = true;
  for (int64_t i = 0; i < search_.trials; ++i) {
    if (stopped()) {
      ended = false;
      break;
    }
    // Trial i is proposed once trial i - parallel has its figure (whatever the others' state).
    while (!pending.empty() && pending.front().job.trial <= i - search_.parallel) collect_oldest();
    // Stopped while waiting: a trial cut short has no figure, and nothing is proposed from it.
    if (stopped() || !add_trial(i)) {
      ended = !stopped();
      break;
    }
    // Two trials of one configuration never train at once: the later waits for the earlier.
    const std::string& config = runs_.back().config_hash;
    while (std::any_of(pending.begin(), pending.end(), [&](const Pending& p) {
      return runs_[static_cast<size_t>(p.job.trial)].config_hash == config;
    }))
      collect_oldest();
    if (stopped()) {
      ended = false;
      break;
    }
    Pending next{.job = prepare_trial(i, rungs_[0]), .ticket = {}, .start = {}};
    if (!next.job.figure) {
      console_.start_run(static_cast<int>(i + 1), static_cast<int>(search_.trials),
                         job_name(next.job));
      const auto waiting = std::chrono::steady_clock::now();  // for a free slot
      next.ticket = slots_->start(next.job.planned);
      training_seconds_ += seconds_since(waiting);
      next.start = std::chrono::steady_clock::now();
    }
    pending.push_back(std::move(next));
  }
  while (!pending.empty()) collect_oldest();  // a stopped batch's runs end themselves
  return ended && !stopped();
}

std::vector<double> StudyRunner::train_all(const std::vector<int64_t>& trials, int64_t epochs) {
  std::vector<double> figures;
  if (!slots_) {
    for (int64_t t : trials) {
      figures.push_back(train_trial(t, epochs));
      if (stopped()) break;
    }
    return figures;
  }
  std::vector<std::pair<TrialJob, std::optional<int64_t>>> started;
  const auto start = std::chrono::steady_clock::now();  // training, all but the preparing
  for (int64_t t : trials) {
    TrialJob job = prepare_trial(t, epochs);
    std::optional<int64_t> ticket;
    if (!job.figure) {
      console_.start_run(static_cast<int>(t + 1), static_cast<int>(search_.trials), job_name(job));
      ticket = slots_->start(job.planned);
    }
    started.emplace_back(std::move(job), ticket);
  }
  for (auto& [job, ticket] : started) {
    if (ticket) {
      slots_->wait(*ticket, summary_);
      console_.end_run(seconds_since(start));
    }
    figures.push_back(ticket ? finish_trial(job) : job.figure.value_or(NAN));
  }
  training_seconds_ += seconds_since(start);
  return figures;
}

bool StudyRunner::out_of_budget(int64_t trials) {
  if (search_.time_budget_seconds <= 0) return false;
  // The epochs' times of the trials' runs as the store holds them (a run two trials share counts
  // once), added in the trials' and epochs' order: a study continued after a kill adds the same
  // figures in the same order, so it stops at the same trial. A run is read again only when its
  // trial's record has gone further (asha promotes earlier trials between proposals).
  std::vector<StudyTrialRow> rows = store_.study_trials(key_);
  std::sort(rows.begin(), rows.end(),
            [](const StudyTrialRow& a, const StudyTrialRow& b) { return a.trial < b.trial; });
  // With trials side by side, those still training are not counted: trial - parallel and before.
  const int64_t through = trials - (search_.parallel - 1);
  double spent = 0;
  std::set<int64_t> counted;
  for (const StudyTrialRow& row : rows) {
    if (row.trial >= through || !counted.insert(row.run_id).second) continue;
    BudgetRun& run = budget_runs_[row.run_id];
    if (row.epochs > run.epochs || run.seconds.empty()) {
      run = {.epochs = row.epochs, .seconds = {}};
      for (const EpochRow& epoch : store_.epoch_metrics(row.run_id))
        if (const auto it = epoch.values.find(metric::kEpochSeconds); it != epoch.values.end())
          run.seconds.push_back(it->second);
    }
    for (double s : run.seconds) spent += s;
  }
  const double seconds = spent;
  if (seconds < search_.time_budget_seconds) return false;
  console_.line(fmt::format(
      "study {}/{}: its time budget ({}) is spent after {} (their epochs took {}): no more trials "
      "(sweep.search.time_budget)",
      experiment_.name, study_.variant, format_duration(search_.time_budget_seconds),
      plural(trials, "trial"), format_duration(seconds)));
  return true;
}

bool StudyRunner::climb_rungs() {
  // A trial whose settings an earlier trial already has is that trial: it takes no place of its
  // own in the cohort.
  std::map<std::string, size_t> first_of;  // a configuration's first trial
  std::vector<std::string> repeated;       // "4 = 1": trials that an earlier one already trained
  for (size_t i = 0; i < runs_.size(); ++i)
    if (const auto [it, fresh] = first_of.emplace(runs_[i].config_hash, i); fresh) {
      cohort_.push_back(static_cast<int64_t>(i));
      figures_.push_back(seen_[i].value);
    } else {
      repeated.push_back(fmt::format("{} = {}", i, it->second));
    }
  if (!repeated.empty())
    console_.line(fmt::format(
        "study {}/{}: {} trained of {} trials proposed (trial {}: the same resolved config, "
        "trained once; they count toward sweep.search.trials)",
        experiment_.name, study_.variant,
        plural(static_cast<int64_t>(cohort_.size()), "distinct configuration"), runs_.size(),
        join(repeated)));
  for (size_t r = 0; r + 1 < rungs_.size(); ++r) {
    const std::vector<int64_t> promoted =
        promote(cohort_, figures_, search_.schedule.reduction, search_.minimize());
    std::vector<std::string> names;
    for (int64_t t : promoted) names.push_back(std::to_string(t));
    record_decision({.rung = static_cast<int64_t>(r),
                     .epochs = rungs_[r],
                     .evidence = evidence_json(cohort_, figures_),
                     .promoted = nlohmann::json(promoted).dump()},
                    fmt::format("rung {} (epoch {}): {} of {} go on to epoch {}: trial{} {}", r,
                                rungs_[r], promoted.size(), cohort_.size(), rungs_[r + 1],
                                promoted.size() == 1 ? "" : "s", join(names)));
    const std::vector<double> next = train_all(promoted, rungs_[r + 1]);
    if (stopped()) return false;
    cohort_ = promoted;
    figures_ = next;
  }
  return true;
}

bool StudyRunner::run_asha() {
  std::vector<AshaRung> rungs(rungs_.size());
  const int64_t reduction = search_.schedule.reduction;
  int64_t next = 0;       // the next trial to propose
  bool draining = false;  // no new trial will come: what is left is to promote
  while (!stopped()) {
    if (const auto up = asha_promotion(rungs, reduction, search_.minimize(), draining)) {
      AshaRung& from = rungs[up->rung];
      const size_t quota =
          std::max<size_t>(draining ? 1 : 0, from.trials.size() / static_cast<size_t>(reduction));
      record_decision({.trial = up->trial,
                       .rung = static_cast<int64_t>(up->rung),
                       .epochs = rungs_[up->rung],
                       .evidence = evidence_json(from.trials, from.figures),
                       .promoted = nlohmann::json::array({up->trial}).dump()},
                      fmt::format("rung {} (epoch {}): trial {} is in the best {} of {}: it goes "
                                  "on to epoch {}",
                                  up->rung, rungs_[up->rung], up->trial, quota, from.trials.size(),
                                  rungs_[up->rung + 1]));
      from.promoted.insert(up->trial);
      const double figure = train_trial(up->trial, rungs_[up->rung + 1]);
      if (stopped()) return false;
      rungs[up->rung + 1].trials.push_back(up->trial);
      rungs[up->rung + 1].figures.push_back(figure);
      continue;
    }
    if (draining) break;
    if (next >= search_.trials || !add_trial(next)) {
      draining = true;
      continue;
    }
    const double figure = train_trial(next, rungs_[0]);
    if (stopped()) return false;
    seen_.push_back({values_.back(), figure});
    if (!repeats_earlier(next)) {
      rungs[0].trials.push_back(next);
      rungs[0].figures.push_back(figure);
    }
    ++next;
  }
  if (stopped()) return false;
  cohort_ = rungs.back().trials;
  figures_ = rungs.back().figures;
  return true;
}

bool StudyRunner::run_median() {
  const std::string metric = metric_key(search_.metric);
  std::vector<int64_t> completed;  // trials that trained to the end, in order
  for (int64_t i = 0; i < search_.trials; ++i) {
    if (stopped()) return false;
    if (!add_trial(i)) break;
    // Until startup_trials have completed no trial is judged: it trains to the end at once.
    const bool judged = static_cast<int64_t>(completed.size()) >= search_.schedule.startup_trials;
    double figure = train_trial(i, judged ? rungs_[0] : rungs_.back());
    if (stopped()) return false;
    seen_.push_back({values_.back(), figure});
    if (repeats_earlier(i)) continue;
    bool paused = false;
    for (size_t r = 0; judged && r + 1 < rungs_.size(); ++r) {
      std::vector<double> figures;
      for (int64_t t : completed)
        figures.push_back(figure_at(store_, run_of_.at(t), rungs_[r], metric));
      const double middle = median_figure(figures);
      const double best =
          best_figure_by(store_, run_of_.at(i), rungs_[r], metric, search_.minimize());
      const bool goes_on = beats_median(best, middle, search_.minimize());
      // The evidence: the completed trials' figures there, then the judged trial's best so far.
      std::vector<int64_t> judged_trials = completed;
      judged_trials.push_back(i);
      figures.push_back(best);
      record_decision(
          {.trial = i,
           .rung = static_cast<int64_t>(r),
           .epochs = rungs_[r],
           .evidence = evidence_json(judged_trials, figures),
           .promoted = goes_on ? nlohmann::json::array({i}).dump() : "[]"},
          fmt::format("trial {} at epoch {}: its best {} {} the median {} of {}: {}", i, rungs_[r],
                      figure_or_failed(search_.metric, best),
                      goes_on ? "is no worse than" : "is worse than",
                      figure_or_failed(search_.metric, middle),
                      plural(static_cast<int64_t>(completed.size()), "completed trial"),
                      goes_on ? fmt::format("it goes on to epoch {}", rungs_[r + 1]) : "paused"));
      if (!goes_on) {
        paused = true;
        break;
      }
      figure = train_trial(i, rungs_[r + 1]);
      if (stopped()) return false;
    }
    if (paused) continue;
    if (std::isfinite(figure)) completed.push_back(i);  // a failed trial is no yardstick
    cohort_.push_back(i);
    figures_.push_back(figure);
  }
  return true;
}

void StudyRunner::record_decision(StudyDecisionRow row, const std::string& said) {
  row.decision = decisions_++;
  store_.record_study_decision(key_, row);
  console_.line(fmt::format("study {}/{}: {}", experiment_.name, study_.variant, said));
}

std::optional<size_t> StudyRunner::best_of_last_rung() const {
  std::optional<size_t> best;
  for (size_t k = 0; k < cohort_.size(); ++k)
    if (std::isfinite(figures_[k]) &&
        (!best || better_figure(figures_[k], figures_[*best], search_.minimize())))
      best = k;
  return best;
}

double StudyRunner::trial_cost(int64_t trial) const {
  const auto run_id = run_of_.find(trial);
  if (run_id == run_of_.end()) return NAN;
  const std::optional<RunRecord> run = store_.run(run_id->second);
  if (!run || run->status != RunStatus::completed) return NAN;
  if (search_.cost == SearchCost::time_to_target)
    return run_time_to_target(store_, *run, experiment_.report).value_or(INFINITY);
  const auto finals = store_.final_metrics(run->id);
  const auto seconds = finals.find(metric::kTrainSeconds);
  return seconds == finals.end() ? NAN : seconds->second;
}

std::optional<size_t> StudyRunner::pick_from_front() {
  std::vector<std::pair<double, double>> points;  // both lower-is-better
  for (size_t k = 0; k < cohort_.size(); ++k)
    points.push_back({search_.minimize() ? figures_[k] : -figures_[k],
                      seen_[static_cast<size_t>(cohort_[k])].cost});
  const std::vector<size_t> front = pareto_front(points);
  std::vector<std::string> said;
  for (size_t k : front)
    said.push_back(fmt::format("trial {} ({}, {})", cohort_[k],
                               figure_text(search_.metric, figures_[k]),
                               std::isfinite(points[k].second) ? format_duration(points[k].second)
                                                               : "never reached the target"));
  console_.line(fmt::format("study {}/{}: the Pareto front of {} and {} ({} of {}): {}",
                            experiment_.name, study_.variant, metric_key(search_.metric),
                            to_string(search_.cost), front.size(), cohort_.size(),
                            join(said, ", ")));
  // The settings confirmed: the fastest that reach report.target (by the time to it, or by the
  // figure of the weights its run kept); without a target, or none reaching it, the best figure.
  const ReportOptions& report = experiment_.report;
  std::optional<size_t> fastest;
  for (size_t k : front) {
    bool reached = false;
    if (search_.cost == SearchCost::time_to_target)
      reached = std::isfinite(points[k].second);
    else if (report.has_target())
      reached =
          report.reaches_target(kept_figure(store_, run_of_.at(cohort_[k]), report.target_metric));
    if (reached && (!fastest || points[k].second < points[*fastest].second)) fastest = k;
  }
  const std::string target = report.has_target()
                                 ? fmt::format("{} {} {}", report.target_metric,
                                               lower_is_better(report.target()) ? "≤" : "≥",
                                               figure_text(report.target(), report.target_value))
                                 : "";
  if (fastest) {
    console_.line(
        fmt::format("study {}/{}: confirming trial {}: the fastest that reaches {} "
                    "(report.target)",
                    experiment_.name, study_.variant, cohort_[*fastest], target));
    return fastest;
  }
  console_.line(fmt::format("study {}/{}: confirming the best {} on the front: {}",
                            experiment_.name, study_.variant, metric_key(search_.metric),
                            target.empty()
                                ? "set report.target to confirm the fastest that reaches it instead"
                                : "no trial reached " + target));
  // The best figure on the front (ties: the lower cost), so what is confirmed is on it.
  std::optional<size_t> best;
  for (size_t k : front)
    if (!best || better_figure(figures_[k], figures_[*best], search_.minimize()) ||
        (figures_[k] == figures_[*best] && points[k].second < points[*best].second))
      best = k;
  return best;
}

void StudyRunner::record_best() {
  // The best of the last rung (ties: the earlier trial), or with two objectives the one picked
  // from their front; a study whose every trial there failed has none, and its variant no
  // settings to confirm.
  const std::optional<size_t> best =
      search_.cost == SearchCost::none ? best_of_last_rung() : pick_from_front();
  if (!best) {  // ended all the same: recorded, so nothing says it is still searching
    store_.record_study_outcome(key_, StudyOutcomeRow{.values = "[]"});
    console_.line(fmt::format(
        "study {}/{}: no trial reached a {} at epoch {} (each failed or diverged): no best "
        "settings, so no runs of them; the trials' logs say why",
        experiment_.name, study_.variant, metric_key(search_.metric), rungs_.back()));
    return;
  }
  const auto best_trial = static_cast<size_t>(cohort_[*best]);
  StudyOutcomeRow outcome{.best_trial = cohort_[*best],
                          .figure = figures_[*best],
                          .values = values_json(values_[best_trial]),
                          .settings = describe_settings(search_.space, values_[best_trial],
                                                        runs_[best_trial].config_yaml)};
  store_.record_study_outcome(key_, outcome);
  // The figure as the trial's own run states it: of the epoch whose weights it tested.
  std::string where;
  for (const StudyTrialRow& row : store_.study_trials(key_))
    if (row.trial == cohort_[*best])
      if (const auto kept = kept_epoch(store_, row.run_id)) {
        int64_t last = 0;
        for (const EpochRow& epoch : store_.epoch_metrics(row.run_id))
          last = std::max(last, epoch.epoch);
        if (*kept != last)
          where = fmt::format(" at epoch {} of {}, whose weights its run tested", *kept, last);
      }
  console_.line(fmt::format("study {}/{}: best trial {} ({} {}{}): {} ({})", experiment_.name,
                            study_.variant, best_trial, metric_key(search_.metric),
                            figure_or_failed(search_.metric, figures_[*best]), where,
                            outcome.settings, own_work()));
}

StudyTrialRow StudyRunner::trial_row(int64_t trial) const {
  const auto i = static_cast<size_t>(trial);
  return {.trial = trial,
          .values = values_json(values_[i]),
          .settings = describe_settings(search_.space, values_[i], runs_[i].config_yaml),
          .config_hash = runs_[i].config_hash};
}

double StudyRunner::record_trial(int64_t trial, int64_t run_id, int64_t epochs, double figure) {
  run_of_[trial] = run_id;
  std::optional<StudyTrialRow> before;
  for (const StudyTrialRow& r : store_.study_trials(key_))
    if (r.trial == trial) before = r;
  if (before && before->epochs > epochs && before->run_id == run_id) return figure;
  StudyTrialRow row = trial_row(trial);
  row.run_id = run_id;
  row.epochs = epochs;
  if (std::isfinite(figure)) row.figure = figure;
  store_.record_study_trial(key_, row);
  return figure;
}

std::string StudyRunner::cannot_train_here(const RunSpec& run) const {
  if (!executor_.trains_here()) return "";
  const DeviceInfo device = resolve_device(run.runtime);
  if (!device.unavailable_reason.empty()) return device.unavailable_reason;
  if (slots_ && device.type == "cuda" && device.cuda_devices < search_.parallel)
    return fmt::format(
        "sweep.search.parallel {} trains each trial side by side on a GPU of its own; this "
        "machine has {} (lower parallel, or submit it with --slurm: each trial a job of its own)",
        search_.parallel, device.cuda_devices);
  return "";
}

StudyRunner::TrialJob StudyRunner::prepare_trial(int64_t trial, int64_t epochs) {
  TrialJob job{.trial = trial, .epochs = epochs};
  const auto i = static_cast<size_t>(trial);
  const RunSpec& run = runs_[i];
  const std::string metric = metric_key(search_.metric);
  // The last rung is the run's end: its figure is that of the weights the run kept and tested.
  const bool last_rung = epochs >= run.train.epochs;
  // The runs of this trial's configuration, newest first. One that completed has reached every
  // rung (one that stopped early: its last epoch is where it stopped), one paused at or beyond
  // this rung has its figure here: never trained again. A figure missing there (a diverged loss
  // is not recorded) counts as the worst.
  std::vector<RunRecord> history;
  for (const RunRecord& r : store_.runs(experiment_.name))
    if (r.config_hash == run.config_hash) history.insert(history.begin(), r);
  for (const RunRecord& r : history) {
    int64_t last = 0;
    for (const EpochRow& row : store_.epoch_metrics(r.id)) last = std::max(last, row.epoch);
    if (r.status == RunStatus::completed || last >= epochs) {
      job.figure =
          record_trial(trial, r.id, epochs,
                       trial_figure(store_, r.id, std::min(epochs, last), last_rung, metric));
      return job;
    }
  }
  const RunRecord* newest = history.empty() ? nullptr : &history.front();
  // One that failed for good counts as the worst; the study goes on.
  if (newest && newest->status == RunStatus::failed && !is_transient(newest->failure)) {
    job.figure = record_trial(trial, newest->id, epochs, NAN);
    return job;
  }
  if (const std::string why = cannot_train_here(run); !why.empty()) {
    const int64_t id = store_.queue_run(record_experiment(store_, experiment_), queued_run(run, i));
    store_.end_run(id, RunStatus::skipped, why);
    ++summary_.skipped;
    console_.line(fmt::format("- {}/{}: skipped: {}", experiment_.name, run.variant, why));
    job.figure = record_trial(trial, id, epochs, NAN);
    return job;
  }
  PlannedRun planned{.experiment = &experiment_,
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
    planned.run_id = store_.queue_run(record_experiment(store_, experiment_), queued_run(run, i));
  }
  // Recorded before it trains: `trainyard status` shows the study live, a kill keeps its values.
  bool known = false;
  for (const StudyTrialRow& r : store_.study_trials(key_)) known = known || r.trial == trial;
  if (!known) {
    StudyTrialRow first = trial_row(trial);
    first.run_id = planned.run_id;
    store_.record_study_trial(key_, first);
  }
  job.planned = planned;
  return job;
}

std::string StudyRunner::job_name(const TrialJob& job) const {
  return fmt::format("{}/{} to epoch {}{}", experiment_.name,
                     runs_[static_cast<size_t>(job.trial)].variant, job.epochs,
                     job.planned.continues
                         ? (job.planned.promoted ? " (promoted: continues from its pause)"
                                                 : " (continues where it stopped)")
                         : "");
}

double StudyRunner::finish_trial(const TrialJob& job) {
  const bool last_rung = job.epochs >= runs_[static_cast<size_t>(job.trial)].train.epochs;
  const double figure =
      trial_figure(store_, job.planned.run_id, job.epochs, last_rung, metric_key(search_.metric));
  // Stopped by Ctrl-C or --time-limit before the rung: no figure yet, the next batch trains it.
  if (std::isnan(figure) && (stop_requested_.load() || summary_.interrupted)) return figure;
  return record_trial(job.trial, job.planned.run_id, job.epochs, figure);
}

double StudyRunner::train_trial(int64_t trial, int64_t epochs) {
  const TrialJob job = prepare_trial(trial, epochs);
  if (job.figure) return *job.figure;
  console_.start_run(static_cast<int>(trial + 1), static_cast<int>(search_.trials), job_name(job));
  const auto start = std::chrono::steady_clock::now();
  executor_.execute(job.planned, summary_);
  const double seconds = seconds_since(start);
  training_seconds_ += seconds;
  console_.end_run(seconds);
  return finish_trial(job);
}

}  // namespace trainyard
