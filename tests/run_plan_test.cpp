// The planner's rule (runner/run_plan.h) on a real store: each of its six cases, for a batch on
// this machine and for a Slurm submission — the two paths that used to decide this each on their
// own.
#include <gtest/gtest.h>

#include "db/store.h"
#include "runner/run_plan.h"
#include "tests/test_support.h"

namespace trainyard {
namespace {

class RunPlanTest : public ::testing::Test {
 protected:
  testing::TempDir dir;
  Store store{(dir.path() / "t.db").string()};
  int64_t experiment = store.upsert_experiment("exp", "exp.yaml", "", "");

  int64_t queue(const std::string& hash) {
    return store.queue_run(experiment, {.variant = "v",
                                        .config_yaml = "train: {epochs: 1}\n",
                                        .config_hash = hash,
                                        .precision = "32-true",
                                        .strategy = "single"});
  }
  int64_t started(const std::string& hash) {
    const int64_t id = queue(hash);
    store.start_run(id, {.log_path = (dir.path() / "run.log").string()});
    return id;
  }
  ConfigHistory history(const std::string& hash) {
    return read_histories(store, named("exp"))[hash];
  }
  static Experiment named(const std::string& name) {
    Experiment experiment;
    experiment.name = name;
    return experiment;
  }
};

const PlanContext kLocal{};
const PlanContext kSlurm{.scheduler = Scheduler::slurm};

TEST_F(RunPlanTest, ANewConfigStartsANewRun) {
  EXPECT_EQ(plan_run(history("h"), kLocal).fate, RunFate::starts);
  EXPECT_EQ(plan_run(history("h"), kSlurm).fate, RunFate::starts);
  EXPECT_TRUE(read_histories(store, named("not-recorded")).empty());
}

// A run recorded before fingerprints (under the hash its config then had, of paths) is the run of
// the config whose legacy hash that is.
TEST_F(RunPlanTest, ARunRecordedUnderALegacyHashIsTheConfigsRun) {
  const int64_t old = started("by-path");
  store.complete_run(old, {});
  Experiment experiment = named("exp");
  RunSpec run;
  run.config_hash = "by-content";
  run.legacy_config_hash = "by-path";
  experiment.runs.push_back(run);
  const auto histories = read_histories(store, experiment);
  ASSERT_EQ(histories.count("by-content"), 1u);
  EXPECT_EQ(histories.count("by-path"), 0u);
  const RunPlan plan = plan_run(histories.at("by-content"), kLocal);
  EXPECT_EQ(plan.fate, RunFate::already_completed);
  EXPECT_EQ(plan.run->id, old);
}

TEST_F(RunPlanTest, ACompletedConfigIsSkippedUnlessForced) {
  const int64_t done = started("h");
  store.complete_run(done, {});
  started("h");  // a later run of the config, interrupted: the completed one still counts
  store.end_run(done + 1, RunStatus::interrupted, "stopped", FailureClass::interrupted);
  const RunPlan plan = plan_run(history("h"), kLocal);
  EXPECT_EQ(plan.fate, RunFate::already_completed);
  EXPECT_EQ(plan.run->id, done);
  EXPECT_EQ(plan_run(history("h"), kSlurm).fate, RunFate::already_completed);
  EXPECT_EQ(plan_run(history("h"), {.force = true}).fate, RunFate::starts);
}

TEST_F(RunPlanTest, ARunThisMachineCannotTrainIsUnavailableWithWhy) {
  const RunPlan plan = plan_run(history("h"), {.unavailable = "needs a CUDA device, found none"});
  EXPECT_EQ(plan.fate, RunFate::unavailable);
  EXPECT_EQ(plan.reason, "needs a CUDA device, found none");
}

TEST_F(RunPlanTest, TheNewestInterruptedOrTransientlyFailedRunContinues) {
  const int64_t older = started("h");
  store.end_run(older, RunStatus::interrupted, "stopped", FailureClass::interrupted);
  const int64_t newer = started("h");
  store.end_run(newer, RunStatus::failed, "rank 0 killed by SIGKILL", FailureClass::crashed);
  for (const PlanContext& context : {kLocal, kSlurm}) {
    const RunPlan plan = plan_run(history("h"), context);
    EXPECT_EQ(plan.fate, RunFate::continues);
    EXPECT_EQ(plan.run->id, newer);
  }
  // --force and a multi-node batch start a new run instead.
  EXPECT_EQ(plan_run(history("h"), {.force = true}).fate, RunFate::starts);
  EXPECT_EQ(plan_run(history("h"), {.multi_node = true}).fate, RunFate::starts);
}

TEST_F(RunPlanTest, ARunThatFailedForGoodIsNotContinued) {
  const int64_t bad = started("h");
  store.end_run(bad, RunStatus::failed, "no such file", FailureClass::bad_input);
  EXPECT_EQ(plan_run(history("h"), kLocal).fate, RunFate::starts);
}

TEST_F(RunPlanTest, AnInterruptedSlurmRunIsLeftToSubmitAndContinuedBySubmit) {
  const int64_t id = started("h");
  store.end_run(id, RunStatus::interrupted, "time limit", FailureClass::interrupted);
  const int64_t submission = store.create_submission();
  store.assign_slurm_job(id, submission, "7_0", "stem");
  const RunPlan local = plan_run(history("h"), kLocal);
  EXPECT_EQ(local.fate, RunFate::with_slurm);
  EXPECT_EQ(local.slurm_job, "7_0");
  EXPECT_EQ(plan_run(history("h"), kSlurm).fate, RunFate::continues);
}

TEST_F(RunPlanTest, ARunPendingOrRunningInSlurmIsLeftAloneBySubmitEvenWhenForced) {
  const int64_t id = queue("h");
  const int64_t submission = store.create_submission();
  store.assign_slurm_job(id, submission, "7_0", "stem");
  SlurmStates states;
  states.jobs["7_0"] = {.state = "RUNNING"};
  for (bool force : {false, true}) {
    const RunPlan plan = plan_run(
        history("h"), {.scheduler = Scheduler::slurm, .force = force, .slurm_states = &states});
    EXPECT_EQ(plan.fate, RunFate::with_slurm);
    EXPECT_EQ(plan.slurm_state, "running");
    EXPECT_EQ(plan.run->id, id);
  }
  // Once Slurm says the job is over, a queued run it never started is submitted again.
  states.jobs["7_0"] = {.state = "CANCELLED"};
  const RunPlan over =
      plan_run(history("h"), {.scheduler = Scheduler::slurm, .slurm_states = &states});
  EXPECT_EQ(over.fate, RunFate::continues);
  EXPECT_EQ(over.run->id, id);
}

}  // namespace
}  // namespace trainyard
