#include <gtest/gtest.h>

#include <cmath>

#include <cstdio>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "db/store.h"
#include "tests/test_support.h"

namespace trainyard {
namespace {

QueuedRun queued(const std::string& variant, const std::string& hash) {
  return {.variant = variant,
          .config_yaml = "train: {epochs: 1}\n",
          .config_hash = hash,
          .precision = "32-true",
          .strategy = "single"};
}

class StoreTest : public ::testing::Test {
 protected:
  // A database of an older schema at `path`: the current one, taken back by `sql` (which ends
  // with its PRAGMA user_version), for the next Store to migrate.
  void write_older_database(const std::string& sql) {
    { Store store(path); }
    sql::Database db(path);
    db.exec(sql);
  }
  testing::TempDir dir;
  std::string path = (dir.path() / "t.db").string();
};

TEST_F(StoreTest, NewDatabaseIsMigratedToTheCurrentSchemaInWalMode) {
  Store store(path);
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  Store again(path);  // reopening migrates nothing and loses nothing
  EXPECT_EQ(again.schema_version(), Store::kSchemaVersion);
  EXPECT_TRUE(std::filesystem::exists(path + "-wal"));
}

// Schema 9: a version-8 study's outcome (its best trial required) is kept, and an outcome with no
// best trial can then be recorded.
TEST_F(StoreTest, AVersion8StudysOutcomeIsKept) {
  write_older_database(
      "DROP TABLE study_outcomes; CREATE TABLE study_outcomes (experiment TEXT NOT NULL, study "
      "TEXT NOT NULL, study_hash TEXT NOT NULL, best_trial INTEGER NOT NULL, figure REAL, "
      "trial_values TEXT NOT NULL, settings TEXT NOT NULL, PRIMARY KEY (experiment, study, "
      "study_hash)); INSERT INTO study_outcomes VALUES ('e', 's', 'h', 4, 0.25, '[0.1]', "
      "'lr=0.1'); PRAGMA user_version = 8");
  Store store(path);
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  const auto kept = store.study_outcome({"e", "s", "h"});
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->best_trial, 4);
  EXPECT_EQ(kept->figure, 0.25);
  EXPECT_EQ(kept->values, "[0.1]");
  EXPECT_EQ(kept->settings, "lr=0.1");
  store.record_study_outcome({"e", "s", "other"}, {});
  EXPECT_FALSE(store.study_outcome({"e", "s", "other"})->best_trial);
  store.forget_study_outcome({"e", "s", "other"});
  EXPECT_FALSE(store.study_outcome({"e", "s", "other"}));
  EXPECT_TRUE(store.study_outcome({"e", "s", "h"}));
}

// Schema 8: a version-7 study's decisions (one per rung, keyed by it) become decisions in the
// study's order, each its rung's, deciding a cohort (no trial of its own).
TEST_F(StoreTest, AVersion7StudysDecisionsKeepTheirRungs) {
  write_older_database(
      "DROP TABLE study_decisions; CREATE TABLE study_decisions (experiment TEXT NOT NULL, "
      "study TEXT NOT NULL, study_hash TEXT NOT NULL, rung INTEGER NOT NULL, epochs INTEGER "
      "NOT NULL, evidence TEXT NOT NULL, promoted TEXT NOT NULL, decided_at TEXT NOT NULL, "
      "PRIMARY KEY (experiment, study, study_hash, rung)); INSERT INTO study_decisions VALUES "
      "('e', 's', 'h', 1, 3, '[[2,0.4]]', '[2]', 't1'), ('e', 's', 'h', 0, 1, "
      "'[[0,0.5],[2,0.6]]', '[2]', 't0'); PRAGMA user_version = 7");
  Store store(path);
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  const auto decisions = store.study_decisions({"e", "s", "h"});
  ASSERT_EQ(decisions.size(), 2u);
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(decisions[r].decision, r);
    EXPECT_EQ(decisions[r].rung, r);
    EXPECT_FALSE(decisions[r].trial);
  }
  EXPECT_EQ(decisions[1].epochs, 3);
  EXPECT_EQ(decisions[0].evidence, "[[0,0.5],[2,0.6]]");
  // Asynchronous decisions: several in one rung, each of one trial.
  store.record_study_decision({"e", "s", "h"}, {.decision = 2,
                                                .trial = 5,
                                                .rung = 0,
                                                .epochs = 1,
                                                .evidence = "[[5,0.3]]",
                                                .promoted = "[5]"});
  EXPECT_EQ(store.study_decisions({"e", "s", "h"}).back().trial, 5);
}

TEST_F(StoreTest, OlderDatabaseIsMigratedAndKeepsItsRuns) {
  {
    Store store(path);
    int64_t experiment = store.upsert_experiment("exp", "exp.yaml", "", "");
    store.queue_run(experiment, queued("a", "h1"));
  }
  {  // turn it back into a version-1 database
    sql::Database db(path);
    db.exec(
        "DROP TABLE study_trials; DROP TABLE study_decisions; DROP TABLE study_outcomes; "
        "DROP TABLE step_metrics; DROP TABLE slurm_runs; DROP TABLE submissions; "
        "DROP TABLE run_params; ALTER TABLE runs DROP COLUMN uid; DROP TABLE run_attributes; "
        "ALTER TABLE runs DROP COLUMN resumes; ALTER TABLE runs DROP COLUMN failure_class; "
        "ALTER TABLE runs DROP COLUMN heartbeat_at; ALTER TABLE runs DROP COLUMN progress; "
        "ALTER TABLE runs DROP COLUMN repeat; PRAGMA user_version = 1");
  }
  Store store(path);
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  ASSERT_EQ(store.runs("exp").size(), 1u);
  const RunRecord old = store.runs("exp")[0];
  EXPECT_EQ(old.uid, "");  // a run queued before unique ids keeps its files' old names
  store.record_attributes(old.id, {{"param_dtype", "Float"}, {"loss_scaling", "dynamic"}});
  EXPECT_EQ(store.attributes(old.id).at("loss_scaling"), "dynamic");
  EXPECT_TRUE(store.params(old.id).empty());
}

// A study recorded again (continued after a kill) replaces its rows, never adds to them; a
// decision keeps the moment it was first taken.
TEST_F(StoreTest, AStudyRecordedAgainIsTheSameStudy) {
  Store store(path);
  const StudyKey key{"exp", "fp32", "h"}, other{"exp", "fp32", "edited"};
  store.record_study_trial(key, {.trial = 0, .values = "[0.1]", .settings = "lr=0.1"});
  store.record_study_trial(
      key, {.trial = 0, .values = "[0.1]", .settings = "lr=0.1", .epochs = 3, .figure = 0.5});
  store.record_study_trial(key, {.trial = 1, .values = "[0.2]", .settings = "lr=0.2"});
  store.record_study_trial(other, {.trial = 0, .values = "[0.3]", .settings = "lr=0.3"});
  const auto trials = store.study_trials(key);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].epochs, 3);
  EXPECT_EQ(trials[0].figure, 0.5);
  EXPECT_FALSE(trials[1].figure);
  store.record_study_decision(key, {.rung = 0,
                                    .epochs = 1,
                                    .evidence = "[[0,0.5]]",
                                    .promoted = "[0]",
                                    .decided_at = "2026-01-01T00:00:00Z"});
  store.record_study_decision(key, {.rung = 0,
                                    .epochs = 1,
                                    .evidence = "[[0,0.5]]",
                                    .promoted = "[0]",
                                    .decided_at = "2026-02-02T00:00:00Z"});
  ASSERT_EQ(store.study_decisions(key).size(), 1u);
  EXPECT_EQ(store.study_decisions(key)[0].decided_at, "2026-01-01T00:00:00Z");
  EXPECT_FALSE(store.study_outcome(key));
  store.record_study_outcome(key, {});  // ended with no best trial: every one failed
  ASSERT_TRUE(store.study_outcome(key));
  EXPECT_FALSE(store.study_outcome(key)->best_trial);
  store.record_study_outcome(key, {.best_trial = 0, .figure = 0.5, .values = "[0.1]"});
  EXPECT_EQ(store.study_outcome(key)->best_trial, 0);
  ASSERT_EQ(store.study_progress().size(), 2u);
  EXPECT_EQ(store.study_progress()[0].trials + store.study_progress()[1].trials, 3);
}

// A study trained in its own database (a Slurm job's) joins this one: its runs under new ids,
// with their figures and params, its experiment by name, its trials naming the new ids; taken in
// again after it grew, nothing doubles and the figures are the latest.
TEST_F(StoreTest, AnotherDatabasesRunsAndStudiesAreTakenInOnceUnderTheirOwnIds) {
  Store store(path);
  const int64_t here =
      store.queue_run(store.upsert_experiment("mine", "m.yaml", "", ""), queued("a", "h0"));
  const std::string other_path = (dir.path() / "study.db").string();
  int64_t first = 0, second = 0;
  const StudyKey key{"searched", "fp32", "s1"};
  {
    Store other(other_path);
    const int64_t experiment = other.upsert_experiment("searched", "s.yaml", "", "");
    QueuedRun run = queued("fp32", "t0");
    run.params = {{"train.optimizer.lr", "0.01"}};
    first = other.queue_run(experiment, run);
    second = other.queue_run(experiment, queued("fp32", "t1"));
    other.record_epoch(first, 1, {{"val_loss", 0.5}});
    other.record_step(first, 4, {{"train_loss", 0.75}});
    other.record_attributes(first, {{"threads", "1"}});
    other.complete_run(first, {{"test_acc", 0.25}});
    other.record_study_trial(key, {.trial = 0,
                                   .values = "[0.01]",
                                   .settings = "",
                                   .config_hash = "",
                                   .run_id = first,
                                   .epochs = 1});
    other.record_study_trial(
        key, {.trial = 1, .values = "[0.02]", .settings = "", .config_hash = "", .run_id = second});
    other.record_study_trial(
        key, {.trial = 2, .values = "[0.03]", .settings = "", .config_hash = ""});  // no run yet
    other.record_study_decision(key, {.rung = 0, .epochs = 1, .evidence = "[]", .promoted = "[0]"});
  }
  EXPECT_EQ(store.import_store(other_path), 2);
  auto imported = store.runs("searched");
  ASSERT_EQ(imported.size(), 2u);
  EXPECT_NE(imported[0].id, here);
  EXPECT_EQ(imported[0].status, RunStatus::completed);
  EXPECT_EQ(store.epoch_metrics(imported[0].id).at(0).values.at("val_loss"), 0.5);
  EXPECT_EQ(store.step_metrics(imported[0].id).at(0).values.at("train_loss"), 0.75);
  EXPECT_EQ(store.final_metrics(imported[0].id).at("test_acc"), 0.25);
  EXPECT_EQ(store.attributes(imported[0].id).at("threads"), "1");
  EXPECT_EQ(store.params(imported[0].id).at("train.optimizer.lr"), "0.01");
  auto trials = store.study_trials(key);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].run_id, imported[0].id);
  EXPECT_EQ(trials[1].run_id, imported[1].id);
  EXPECT_EQ(trials[2].run_id, 0);
  EXPECT_EQ(store.study_decisions(key).size(), 1u);
  EXPECT_EQ(store.runs("mine").size(), 1u);
  EXPECT_TRUE(store.epoch_metrics(here).empty());

  {
    Store other(other_path);
    other.record_epoch(second, 1, {{"val_loss", 0.375}});
    other.record_epoch(first, 1, {{"val_loss", 0.125}});  // recorded again after a resume
    other.record_study_trial(key, {.trial = 1,
                                   .values = "[0.02]",
                                   .settings = "",
                                   .config_hash = "",
                                   .run_id = second,
                                   .epochs = 1});
  }
  EXPECT_EQ(store.import_store(other_path), 2);
  const auto again = store.runs("searched");
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].id, imported[0].id);
  EXPECT_EQ(again[1].id, imported[1].id);
  EXPECT_EQ(store.epoch_metrics(again[0].id).size(), 1u);
  EXPECT_EQ(store.epoch_metrics(again[0].id).at(0).values.at("val_loss"), 0.125);
  EXPECT_EQ(store.epoch_metrics(again[1].id).at(0).values.at("val_loss"), 0.375);
  EXPECT_EQ(store.study_trials(key).at(1).epochs, 1);
  EXPECT_EQ(store.study_trials(key).size(), 3u);
  EXPECT_EQ(store.runs().size(), 3u);
}

// Run ids restart at 1 in every database; uids do not. The flat params are kept per run.
TEST_F(StoreTest, EveryRunHasAUniqueIdAndItsFlatParams) {
  Store store(path);
  Store other((dir.path() / "other.db").string());
  int64_t experiment = store.upsert_experiment("exp", "exp.yaml", "", "");
  QueuedRun run = queued("a", "h1");
  run.params = {{"train.epochs", "3"}, {"model.name", "vit"}};
  const int64_t id = store.queue_run(experiment, run);
  const int64_t other_id = other.queue_run(other.upsert_experiment("exp", "exp.yaml", "", ""), run);
  EXPECT_EQ(id, other_id);
  const std::string uid = store.run(id)->uid;
  EXPECT_EQ(uid.size(), 12u);
  EXPECT_NE(uid, other.run(other_id)->uid);
  EXPECT_NE(uid, store.run(store.queue_run(experiment, run))->uid);
  EXPECT_EQ(store.params(id), run.params);
}

TEST_F(StoreTest, ProcessesOpeningANewDatabaseTogetherMigrateItOnce) {
  // Regression: a report opened the database while `trainyard run` was creating it, and both ran
  // the first migration ("table experiments already exists").
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    pid_t child = fork();
    if (child == 0) {
      try {
        Store store(path);
        _exit(store.schema_version() == Store::kSchemaVersion ? 0 : 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());  // what the failure was
        _exit(2);
      }
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

TEST_F(StoreTest, DatabaseFromANewerTrainyardIsRefused) {
  {
    sql::Database db(path);
    db.exec("PRAGMA user_version = 99");
  }
  try {
    Store store(path);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99, newer than this trainyard's"),
              std::string::npos);
  }
}

// Read-only access reads without writing (no WAL switch, no migration), refuses writes, and
// refuses a schema it would have to migrate. (On a read-only file system: BatchTest's full disk.)
TEST_F(StoreTest, ReadOnlyAccessReadsAndWritesNothing) {
  {
    Store store(path);
    store.queue_run(store.upsert_experiment("exp", "exp.yaml", "", ""), queued("a", "h1"));
  }
  {
    Store reader(path, sql::Access::read_only);
    EXPECT_TRUE(reader.read_only());
    EXPECT_EQ(reader.runs("exp").size(), 1u);
    EXPECT_THROW(reader.upsert_experiment("other", "o.yaml", "", ""), std::runtime_error);
  }
  EXPECT_FALSE(Store(path).find_experiment("other"));
  {
    sql::Database db(path);
    db.exec("PRAGMA user_version = 4");
  }
  try {
    Store reader(path, sql::Access::read_only);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 4, and this trainyard reads version"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Store((dir.path() / "none.db").string(), sql::Access::read_only),
               std::runtime_error);
}

TEST_F(StoreTest, RunLifecycleAndMetrics) {
  Store store(path);
  int64_t experiment = store.upsert_experiment("exp", "exp.yaml", "d", "baseline: a\n");
  EXPECT_EQ(store.upsert_experiment("exp", "moved.yaml", "d2", ""), experiment);
  EXPECT_EQ(store.find_experiment("exp")->file, "moved.yaml");

  int64_t run = store.queue_run(experiment, queued("a", "h1"));
  EXPECT_EQ(store.run(run)->status, RunStatus::queued);
  store.start_run(run, {"abc123", "2.11.0", "CPU", "log.txt"});
  EXPECT_EQ(store.run(run)->status, RunStatus::running);
  store.record_epoch(run, 1, {{"val_acc", 0.5}, {"train_loss", 1.5}});
  store.record_epoch(run, 2, {{"val_acc", 0.75}});
  store.complete_run(run, {{"test_acc", 0.8}, {"train_seconds", 12.5}});

  RunRecord record = *store.run(run);
  EXPECT_EQ(record.status, RunStatus::completed);
  EXPECT_EQ(record.environment.git_revision, "abc123");
  EXPECT_EQ(record.environment.torch_version, "2.11.0");
  EXPECT_FALSE(record.ended_at.empty());
  EXPECT_DOUBLE_EQ(store.final_metrics(run).at("test_acc"), 0.8);
  auto epochs = store.epoch_metrics(run);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_DOUBLE_EQ(epochs[0].values.at("train_loss"), 1.5);
  EXPECT_DOUBLE_EQ(epochs[1].values.at("val_acc"), 0.75);
}

// A step's figures merge (the loss at a progress line, a validation at the same step), a run that
// continues records them again over the old ones, NaN is left out, and removing the run removes
// them.
TEST_F(StoreTest, StepRecordsMergeReplaceAndGoWithTheirRun) {
  Store store(path);
  const int64_t experiment = store.upsert_experiment("exp", "exp.yaml", "", "");
  const int64_t run = store.queue_run(experiment, queued("a", "h1"));
  store.record_step(run, 20, {{"train_loss", 1.5}, {"elapsed_seconds", 3}});
  store.record_step(run, 20, {{"val_acc", 0.5}, {"val_seconds", 0.25}, {"elapsed_seconds", 3.5}});
  store.record_step(run, 10, {{"train_loss", std::nan("")}, {"elapsed_seconds", 1}});
  store.record_step(run, 20, {{"val_acc", 0.625}});  // again, after a resume
  const auto steps = store.step_metrics(run);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 10);
  EXPECT_FALSE(steps[0].values.count("train_loss"));
  EXPECT_EQ(steps[1].values, (std::map<std::string, double>{{"train_loss", 1.5},
                                                            {"val_acc", 0.625},
                                                            {"val_seconds", 0.25},
                                                            {"elapsed_seconds", 3.5}}));
  store.remove_runs({run});
  EXPECT_TRUE(store.step_metrics(run).empty());
}

TEST_F(StoreTest, FindsOnlyCompletedRunsOfTheSameConfig) {
  Store store(path);
  int64_t experiment = store.upsert_experiment("exp", "exp.yaml", "", "");
  int64_t failed = store.queue_run(experiment, queued("a", "h1"));
  store.end_run(failed, RunStatus::failed, "boom");
  EXPECT_FALSE(store.find_completed_run(experiment, "h1"));
  int64_t done = store.queue_run(experiment, queued("a", "h1"));
  store.complete_run(done, {});
  EXPECT_EQ(store.find_completed_run(experiment, "h1"), done);
  EXPECT_FALSE(store.find_completed_run(experiment, "h2"));
  EXPECT_EQ(store.run(failed)->error, "boom");
}

TEST_F(StoreTest, RunsOfADeadProcessAreMarkedInterrupted) {
  Store store(path);
  int64_t experiment = store.upsert_experiment("exp", "exp.yaml", "", "");
  // A child process queues and starts a run, then dies without finishing it.
  pid_t child = fork();
  if (child == 0) {
    Store theirs(path);
    int64_t run = theirs.queue_run(experiment, queued("a", "h1"));
    theirs.start_run(run, {});
    theirs.queue_run(experiment, queued("b", "h2"));
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  int64_t mine = store.queue_run(experiment, queued("c", "h3"));  // this process is alive
  EXPECT_EQ(store.mark_orphaned_runs_interrupted(), 2);
  auto runs = store.runs("exp");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].status, RunStatus::interrupted);
  EXPECT_EQ(runs[1].status, RunStatus::interrupted);
  EXPECT_EQ(store.run(mine)->status, RunStatus::queued);
}

TEST_F(StoreTest, RunsFilterByExperiment) {
  Store store(path);
  int64_t a = store.upsert_experiment("a", "a.yaml", "", "");
  int64_t b = store.upsert_experiment("b", "b.yaml", "", "");
  store.queue_run(a, queued("x", "1"));
  store.queue_run(b, queued("y", "2"));
  EXPECT_EQ(store.runs().size(), 2u);
  ASSERT_EQ(store.runs("b").size(), 1u);
  EXPECT_EQ(store.runs("b")[0].variant, "y");
  EXPECT_EQ(store.runs("b")[0].experiment, "b");
}

}  // namespace
}  // namespace trainyard
