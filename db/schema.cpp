// The database's schema: each version's migration, and Store::migrate, which applies those a
// database lacks. docs/schema.md describes the tables; a change to one is a new entry here.
#include <iterator>
#include <stdexcept>
#include <string>

#include "db/store.h"

namespace trainyard {

namespace {

// Each entry moves the schema from version i to i + 1. Never edit a released entry: add one.
const char* const kMigrations[] = {
    // 1: experiments, runs, metrics.
    R"sql(
    CREATE TABLE experiments (
      id INTEGER PRIMARY KEY,
      name TEXT NOT NULL UNIQUE,
      file TEXT NOT NULL,
      description TEXT NOT NULL DEFAULT '',
      report_yaml TEXT NOT NULL DEFAULT '',
      created_at TEXT NOT NULL
    );
    CREATE TABLE runs (
      id INTEGER PRIMARY KEY,
      experiment_id INTEGER NOT NULL REFERENCES experiments(id),
      variant TEXT NOT NULL,
      position INTEGER NOT NULL,
      config_yaml TEXT NOT NULL,
      config_hash TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN
        ('queued', 'running', 'completed', 'failed', 'interrupted', 'skipped')),
      precision TEXT NOT NULL,
      strategy TEXT NOT NULL,
      devices INTEGER NOT NULL,
      queued_at TEXT NOT NULL,
      started_at TEXT,
      ended_at TEXT,
      host TEXT NOT NULL DEFAULT '',
      pid INTEGER NOT NULL DEFAULT 0,
      git_revision TEXT NOT NULL DEFAULT '',
      torch_version TEXT NOT NULL DEFAULT '',
      device_name TEXT NOT NULL DEFAULT '',
      log_path TEXT NOT NULL DEFAULT '',
      error TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX runs_by_config ON runs(experiment_id, config_hash, status);
    CREATE TABLE epoch_metrics (
      run_id INTEGER NOT NULL REFERENCES runs(id),
      epoch INTEGER NOT NULL,
      key TEXT NOT NULL,
      value REAL NOT NULL,
      PRIMARY KEY (run_id, epoch, key)
    );
    CREATE TABLE final_metrics (
      run_id INTEGER NOT NULL REFERENCES runs(id),
      key TEXT NOT NULL,
      value REAL NOT NULL,
      PRIMARY KEY (run_id, key)
    );
    )sql",
    // 2: facts about a run known once it is set up (the dtypes actually used, ...).
    R"sql(
    CREATE TABLE run_attributes (
      run_id INTEGER NOT NULL REFERENCES runs(id),
      key TEXT NOT NULL,
      value TEXT NOT NULL,
      PRIMARY KEY (run_id, key)
    );
    )sql",
    // 3: a run's unique id (its files are named by it: run ids restart in every database), and its
    // resolved config flat, one row per dotted key (MLflow's params), for SQL to group by.
    R"sql(
    ALTER TABLE runs ADD COLUMN uid TEXT NOT NULL DEFAULT '';
    CREATE TABLE run_params (
      run_id INTEGER NOT NULL REFERENCES runs(id),
      key TEXT NOT NULL,
      value TEXT NOT NULL,
      PRIMARY KEY (run_id, key)
    );
    CREATE INDEX run_params_by_key ON run_params(key, value);
    )sql",
    // 4: overnight batches: how many times a run was continued from its checkpoint, why it failed
    // (a class: retried or not), the controller's heartbeat and the run's progress for `trainyard
    // status`, and which repeat of its variant it is (sweep.repeats).
    R"sql(
    ALTER TABLE runs ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN failure_class TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN heartbeat_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN progress TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN repeat INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 5: Slurm: submissions, and which array task trains which run, with how much of the task's
    // records file (<stem>.events.jsonl) the store has taken in.
    R"sql(
    CREATE TABLE submissions (
      id INTEGER PRIMARY KEY,
      folder TEXT NOT NULL DEFAULT '',
      created_at TEXT NOT NULL,
      host TEXT NOT NULL,
      report_job TEXT NOT NULL DEFAULT '',
      cancelled INTEGER NOT NULL DEFAULT 0,
      user TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE slurm_runs (
      run_id INTEGER PRIMARY KEY REFERENCES runs(id),
      submission_id INTEGER NOT NULL REFERENCES submissions(id),
      job_id TEXT NOT NULL,
      stem TEXT NOT NULL,
      events_offset INTEGER NOT NULL DEFAULT 0
    );
    )sql",
    // 6: figures by optimizer step: the loss at progress lines and every validation, with the
    // training time it was reached at (time-to-target, curves per step).
    R"sql(
    CREATE TABLE step_metrics (
      run_id INTEGER NOT NULL REFERENCES runs(id),
      step INTEGER NOT NULL,
      key TEXT NOT NULL,
      value REAL NOT NULL,
      PRIMARY KEY (run_id, step, key)
    );
    )sql",
    // 7: studies (sweep.search): each trial's values and how far it trained, each rung's decision
    // with its evidence, and each study's best trial. Keyed by the experiment's name, the variant
    // searched and the study's identity (its settings and the variant's configuration).
    R"sql(
    CREATE TABLE study_trials (
      experiment TEXT NOT NULL,
      study TEXT NOT NULL,
      study_hash TEXT NOT NULL,
      trial INTEGER NOT NULL,
      trial_values TEXT NOT NULL,
      settings TEXT NOT NULL,
      config_hash TEXT NOT NULL,
      run_id INTEGER NOT NULL DEFAULT 0,
      epochs INTEGER NOT NULL DEFAULT 0,
      figure REAL,
      PRIMARY KEY (experiment, study, study_hash, trial)
    );
    CREATE TABLE study_decisions (
      experiment TEXT NOT NULL,
      study TEXT NOT NULL,
      study_hash TEXT NOT NULL,
      rung INTEGER NOT NULL,
      epochs INTEGER NOT NULL,
      evidence TEXT NOT NULL,
      promoted TEXT NOT NULL,
      decided_at TEXT NOT NULL,
      PRIMARY KEY (experiment, study, study_hash, rung)
    );
    CREATE TABLE study_outcomes (
      experiment TEXT NOT NULL,
      study TEXT NOT NULL,
      study_hash TEXT NOT NULL,
      best_trial INTEGER NOT NULL,
      figure REAL,
      trial_values TEXT NOT NULL,
      settings TEXT NOT NULL,
      PRIMARY KEY (experiment, study, study_hash)
    );
    )sql",
    // 8: asynchronous schedules (asha, median) decide trial by trial, several times a rung: each
    // decision has its place in the study's order (for successive halving, its rung) and the trial
    // it decided (NULL: a rung's whole cohort).
    R"sql(
    CREATE TABLE study_decisions_8 (
      experiment TEXT NOT NULL,
      study TEXT NOT NULL,
      study_hash TEXT NOT NULL,
      decision INTEGER NOT NULL,
      trial INTEGER,
      rung INTEGER NOT NULL,
      epochs INTEGER NOT NULL,
      evidence TEXT NOT NULL,
      promoted TEXT NOT NULL,
      decided_at TEXT NOT NULL,
      PRIMARY KEY (experiment, study, study_hash, decision)
    );
    INSERT INTO study_decisions_8 SELECT experiment, study, study_hash, rung, NULL, rung, epochs,
      evidence, promoted, decided_at FROM study_decisions;
    DROP TABLE study_decisions;
    ALTER TABLE study_decisions_8 RENAME TO study_decisions;
    )sql",
    // 9: a study whose every trial failed has ended too, with no best trial (NULL): recorded, so
    // that the report and the trackers say it ended rather than that it is still searching.
    R"sql(
    CREATE TABLE study_outcomes_9 (
      experiment TEXT NOT NULL,
      study TEXT NOT NULL,
      study_hash TEXT NOT NULL,
      best_trial INTEGER,
      figure REAL,
      trial_values TEXT NOT NULL,
      settings TEXT NOT NULL,
      PRIMARY KEY (experiment, study, study_hash)
    );
    INSERT INTO study_outcomes_9 SELECT experiment, study, study_hash, best_trial, figure,
      trial_values, settings FROM study_outcomes;
    DROP TABLE study_outcomes;
    ALTER TABLE study_outcomes_9 RENAME TO study_outcomes;
    )sql",
};
static_assert(std::size(kMigrations) == Store::kSchemaVersion);

}  // namespace

int Store::schema_version() {
  auto s = db_.prepare("PRAGMA user_version");
  s.step();
  return static_cast<int>(s.column_int(0));
}

void Store::migrate() {
  int version = schema_version();
  if (version > kSchemaVersion)
    throw std::runtime_error("database " + path() + " has schema version " +
                             std::to_string(version) + ", newer than this trainyard's (" +
                             std::to_string(kSchemaVersion) + "); use a newer trainyard");
  while (version < kSchemaVersion) {
    // Under the write lock, read the version again: another process opening the same new database
    // (a report, `trainyard runs`) may have migrated it since the first read.
    sql::Transaction transaction(db_);
    version = schema_version();
    if (version >= kSchemaVersion) break;
    db_.exec(kMigrations[version]);
    db_.exec("PRAGMA user_version = " + std::to_string(version + 1));
    transaction.commit();
    ++version;
  }
}

}  // namespace trainyard
