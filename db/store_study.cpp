// The store's study tables (schema versions 7 and 8): study_trials, study_decisions,
// study_outcomes.
#include <string>

#include "common/clock.h"
#include "db/store.h"

namespace trainyard {

namespace {

sql::Statement& bind_key(sql::Statement& s, const StudyKey& key) {
  return s.bind(1, key.experiment).bind(2, key.study).bind(3, key.study_hash);
}

sql::Statement& bind_figure(sql::Statement& s, int index, const std::optional<double>& figure) {
  return figure ? s.bind(index, *figure) : s.bind_null(index);
}

std::optional<double> figure_of(const sql::Statement& s, int column) {
  if (s.column_is_null(column)) return std::nullopt;
  return s.column_double(column);
}

}  // namespace

bool is_paused(const RunRecord& run) {
  return run.status == RunStatus::interrupted && run.error.rfind(kPausedError, 0) == 0;
}

void Store::record_study_trial(const StudyKey& key, const StudyTrialRow& row) {
  auto s = db_.prepare(
      "INSERT OR REPLACE INTO study_trials (experiment, study, study_hash, trial, trial_values, "
      "settings, config_hash, run_id, epochs, figure) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  bind_key(s, key)
      .bind(4, row.trial)
      .bind(5, row.values)
      .bind(6, row.settings)
      .bind(7, row.config_hash)
      .bind(8, row.run_id)
      .bind(9, row.epochs);
  bind_figure(s, 10, row.figure).run();
}

void Store::record_study_decision(const StudyKey& key, const StudyDecisionRow& row) {
  auto s = db_.prepare(
      "INSERT INTO study_decisions (experiment, study, study_hash, decision, trial, rung, epochs, "
      "evidence, promoted, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
      "(experiment, study, study_hash, decision) DO UPDATE SET trial = excluded.trial, rung = "
      "excluded.rung, epochs = excluded.epochs, evidence = excluded.evidence, promoted = "
      "excluded.promoted");
  bind_key(s, key).bind(4, row.decision);
  if (row.trial)
    s.bind(5, *row.trial);
  else
    s.bind_null(5);
  s.bind(6, row.rung)
      .bind(7, row.epochs)
      .bind(8, row.evidence)
      .bind(9, row.promoted)
      .bind(10, row.decided_at.empty() ? utc_now() : row.decided_at)
      .run();
}

void Store::record_study_outcome(const StudyKey& key, const StudyOutcomeRow& row) {
  auto s = db_.prepare(
      "INSERT OR REPLACE INTO study_outcomes (experiment, study, study_hash, best_trial, figure, "
      "trial_values, settings) VALUES (?, ?, ?, ?, ?, ?, ?)");
  bind_key(s, key);
  if (row.best_trial)
    s.bind(4, *row.best_trial);
  else
    s.bind_null(4);
  bind_figure(s, 5, row.figure).bind(6, row.values).bind(7, row.settings).run();
}

void Store::forget_study_outcome(const StudyKey& key) {
  auto s = db_.prepare(
      "DELETE FROM study_outcomes WHERE experiment = ? AND study = ? AND study_hash = ?");
  bind_key(s, key).run();
}

std::vector<StudyTrialRow> Store::study_trials(const StudyKey& key) {
  auto s = db_.prepare(
      "SELECT trial, trial_values, settings, config_hash, run_id, epochs, figure FROM "
      "study_trials WHERE experiment = ? AND study = ? AND study_hash = ? ORDER BY trial");
  bind_key(s, key);
  std::vector<StudyTrialRow> rows;
  while (s.step())
    rows.push_back({.trial = s.column_int(0),
                    .values = s.column_text(1),
                    .settings = s.column_text(2),
                    .config_hash = s.column_text(3),
                    .run_id = s.column_int(4),
                    .epochs = s.column_int(5),
                    .figure = figure_of(s, 6)});
  return rows;
}

std::vector<StudyDecisionRow> Store::study_decisions(const StudyKey& key) {
  auto s = db_.prepare(
      "SELECT decision, trial, rung, epochs, evidence, promoted, decided_at FROM study_decisions "
      "WHERE experiment = ? AND study = ? AND study_hash = ? ORDER BY decision");
  bind_key(s, key);
  std::vector<StudyDecisionRow> rows;
  while (s.step())
    rows.push_back(
        {.decision = s.column_int(0),
         .trial = s.column_is_null(1) ? std::nullopt : std::optional<int64_t>(s.column_int(1)),
         .rung = s.column_int(2),
         .epochs = s.column_int(3),
         .evidence = s.column_text(4),
         .promoted = s.column_text(5),
         .decided_at = s.column_text(6)});
  return rows;
}

std::optional<StudyOutcomeRow> Store::study_outcome(const StudyKey& key) {
  auto s = db_.prepare(
      "SELECT best_trial, figure, trial_values, settings FROM study_outcomes WHERE experiment = ? "
      "AND study = ? AND study_hash = ?");
  bind_key(s, key);
  if (!s.step()) return std::nullopt;
  return StudyOutcomeRow{
      .best_trial = s.column_is_null(0) ? std::nullopt : std::optional<int64_t>(s.column_int(0)),
      .figure = figure_of(s, 1),
      .values = s.column_text(2),
      .settings = s.column_text(3)};
}

std::optional<std::pair<StudyKey, StudyTrialRow>> Store::study_trial_of(int64_t run_id) {
  auto s = db_.prepare(
      "SELECT experiment, study, study_hash, trial, trial_values, settings, config_hash, epochs, "
      "figure FROM study_trials WHERE run_id = ? ORDER BY experiment, study, study_hash, trial "
      "LIMIT 1");
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  return std::pair{StudyKey{s.column_text(0), s.column_text(1), s.column_text(2)},
                   StudyTrialRow{.trial = s.column_int(3),
                                 .values = s.column_text(4),
                                 .settings = s.column_text(5),
                                 .config_hash = s.column_text(6),
                                 .run_id = run_id,
                                 .epochs = s.column_int(7),
                                 .figure = figure_of(s, 8)}};
}

std::vector<StudyProgress> Store::study_progress() {
  auto s = db_.prepare(
      "SELECT t.experiment, t.study, t.study_hash, COUNT(*), "
      "(SELECT COUNT(*) FROM study_decisions d WHERE d.experiment = t.experiment AND "
      "d.study = t.study AND d.study_hash = t.study_hash), "
      "(SELECT promoted FROM study_decisions d WHERE d.experiment = t.experiment AND "
      "d.study = t.study AND d.study_hash = t.study_hash ORDER BY decision DESC LIMIT 1), "
      "(SELECT settings FROM study_outcomes o WHERE o.experiment = t.experiment AND "
      "o.study = t.study AND o.study_hash = t.study_hash), "
      "SUM(EXISTS (SELECT 1 FROM runs r WHERE r.id = t.run_id AND r.status IN ('queued', "
      "'running'))) "
      "FROM study_trials t GROUP BY t.experiment, t.study, t.study_hash "
      "ORDER BY t.experiment, t.study");
  std::vector<StudyProgress> out;
  while (s.step()) {
    StudyProgress p{.key = {s.column_text(0), s.column_text(1), s.column_text(2)},
                    .trials = s.column_int(3),
                    .decisions = s.column_int(4),
                    .last_promoted = s.column_text(5)};
    if (!s.column_is_null(6)) p.best = s.column_text(6);
    p.training = s.column_int(7);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace trainyard
