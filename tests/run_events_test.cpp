// A Slurm task's records file and its collection into the store: applied once, in order, whole;
// a half-written line waits; collecting twice changes nothing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "db/run_events.h"
#include "tests/test_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

class RunEventsTest : public ::testing::Test {
 protected:
  RunEventsTest() : store((dir.path() / "t.db").string()) {
    const int64_t experiment = store.upsert_experiment("e", "e.yaml", "", "");
    run_id = store.queue_run(experiment, {.variant = "v",
                                          .config_yaml = "a: 1\n",
                                          .config_hash = "h",
                                          .precision = "32-true",
                                          .strategy = "single"});
    submission = store.create_submission();
    stem = (dir.path() / "run-1-v").string();
    store.assign_slurm_job(run_id, submission, "12_0", stem);
  }
  CollectedEvents collect() { return collect_run_events(store, *store.slurm_run(run_id)); }

  testing::TempDir dir;
  Store store;
  int64_t run_id = 0, submission = 0;
  std::string stem;
};

TEST_F(RunEventsTest, RecordsReachTheStoreOnceWhateverTimesTheyAreCollected) {
  {
    RunEventWriter events(stem + ".events.jsonl");
    events.started({.torch_version = "2.11.0", .log_path = stem + ".log"}, "12_0");
    events.attributes({{"world_size", "1"}});
    events.epoch(1, {{"train_loss", 0.5}, {"val_loss", -INFINITY}});
  }
  EXPECT_EQ(collect().applied, 3);
  EXPECT_EQ(store.run(run_id)->status, RunStatus::running);
  EXPECT_EQ(store.run(run_id)->environment.torch_version, "2.11.0");
  EXPECT_EQ(collect().applied, 0);  // nothing new
  {
    RunEventWriter events(stem + ".events.jsonl");
    events.epoch(2, {{"train_loss", 0.25}});
    events.step(30, {{"val_acc", 0.5}, {"elapsed_seconds", 12.5}});
    events.completed({{"test_acc", 0.75}, {"train_seconds", INFINITY}});
  }
  const CollectedEvents more = collect();
  EXPECT_EQ(more.applied, 3);
  EXPECT_TRUE(more.finished);
  EXPECT_EQ(collect().applied, 0);
  const RunRecord run = *store.run(run_id);
  EXPECT_EQ(run.status, RunStatus::completed);
  const auto epochs = store.epoch_metrics(run_id);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].values.at("val_loss"), -INFINITY);  // JSON has no infinity: not lost
  EXPECT_EQ(epochs[1].values.at("train_loss"), 0.25);
  EXPECT_EQ(store.final_metrics(run_id).at("test_acc"), 0.75);
  EXPECT_TRUE(std::isinf(store.final_metrics(run_id).at("train_seconds")));
  EXPECT_EQ(store.attributes(run_id).at("world_size"), "1");
  const auto steps = store.step_metrics(run_id);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, 30);
  EXPECT_EQ(steps[0].values.at("elapsed_seconds"), 12.5);
}

// A task killed in the middle of a write leaves half a line: the collector waits for the newline,
// and the task's next start cuts the half line off before appending.
TEST_F(RunEventsTest, AHalfWrittenLineWaitsAndIsCutOffByTheNextWriter) {
  const std::string path = stem + ".events.jsonl";
  {
    RunEventWriter events(path);
    events.started({}, "12_0");
  }
  { std::ofstream(path, std::ios::app) << R"({"event": "epoch", "epoch": 1, "val)"; }
  EXPECT_EQ(collect().applied, 1);
  EXPECT_EQ(collect().applied, 0);
  {
    RunEventWriter events(path);  // the requeued task
    events.resumed("12_0");
    events.ended(RunStatus::failed, "rank 0 exited with code 1", FailureClass::crashed);
  }
  const CollectedEvents rest = collect();
  EXPECT_EQ(rest.applied, 2);
  EXPECT_TRUE(rest.problem.empty()) << rest.problem;
  const RunRecord run = *store.run(run_id);
  EXPECT_EQ(run.status, RunStatus::failed);
  EXPECT_EQ(run.failure, FailureClass::crashed);
  EXPECT_EQ(run.resumes, 1);
}

// A whole line that is not a record (a disk's garbage) is skipped with a note naming the file and
// the byte; the records around it still count.
TEST_F(RunEventsTest, AnUnreadableLineIsSkippedAndNamed) {
  const std::string path = stem + ".events.jsonl";
  {
    std::ofstream(path)
        << "{\"event\": \"started\", \"host\": \"n1\", \"pid\": 7}\nnot json\n"
           "{\"event\": \"nonsense\"}\n{\"event\": \"requeued\", \"restarts\": 1}\n";
  }
  const CollectedEvents collected = collect();
  EXPECT_EQ(collected.applied, 2);
  EXPECT_NE(collected.problem.find(path + ": byte"), std::string::npos) << collected.problem;
  EXPECT_EQ(store.run(run_id)->status, RunStatus::queued);  // requeued
  EXPECT_EQ(store.run(run_id)->host, "n1");
}

// Submitting a run again keeps what was taken in of its records file.
TEST_F(RunEventsTest, ASecondSubmissionKeepsTheOffset) {
  {
    RunEventWriter events(stem + ".events.jsonl");
    events.started({}, "12_0");
  }
  collect();
  const int64_t offset = store.slurm_run(run_id)->events_offset;
  EXPECT_GT(offset, 0);
  store.assign_slurm_job(run_id, store.create_submission(), "13_0", stem);
  EXPECT_EQ(store.slurm_run(run_id)->events_offset, offset);
  EXPECT_EQ(store.slurm_run(run_id)->job_id, "13_0");
  store.assign_slurm_job(run_id, submission, "14_0", stem + "-other");
  EXPECT_EQ(store.slurm_run(run_id)->events_offset, 0);
}

// A Slurm run is Slurm's to account for: never marked interrupted as an orphan of this host.
TEST_F(RunEventsTest, ASlurmRunIsNoOrphan) {
  {
    RunEventWriter events(stem + ".events.jsonl");
    events.started({}, "12_0");
  }
  collect();
  EXPECT_EQ(store.mark_orphaned_runs_interrupted(), 0);  // its pid (this process) is alive anyway
  store.in_transaction([&] { store.record_heartbeat(run_id, std::nullopt); });
  EXPECT_EQ(store.run(run_id)->status, RunStatus::running);
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// A diverged run's progress (NaN loss) survives the heartbeat's JSON, and an older null reads as 0.
TEST(RunProgressJson, NonFiniteFiguresAndWrongTypesNeverThrow) {
  const RunProgress p =
      RunProgress::from_json(RunProgress{.step = 3, .loss = std::nan("")}.to_json());
  EXPECT_EQ(p.step, 3);
  EXPECT_TRUE(std::isnan(p.loss));
  const RunProgress old = RunProgress::from_json(R"({"step": "x", "loss": null, "epoch": 2})");
  EXPECT_EQ(old.step, 0);
  EXPECT_EQ(old.loss, 0.0);
  EXPECT_EQ(old.epoch, 2);
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// Two collectors at once (a `status` beside a `report`): the second one's copy of the task record
// is stale, yet it applies nothing twice — the offset is read again under the write lock.
TEST_F(RunEventsTest, AStaleTaskRecordAppliesNothingTwice) {
  {
    RunEventWriter events(stem + ".events.jsonl");
    events.started({}, "12_0");
    events.resumed("12_0");
  }
  const SlurmRunRecord stale = *store.slurm_run(run_id);
  EXPECT_EQ(collect_run_events(store, stale).applied, 2);
  EXPECT_EQ(collect_run_events(store, stale).applied, 0);
  EXPECT_EQ(store.run(run_id)->resumes, 1);
}

// A records file shorter than what was taken in (replaced by hand) is named, never re-applied.
TEST_F(RunEventsTest, AShrunkenFileIsReported) {
  {
    RunEventWriter events(stem + ".events.jsonl");
    events.started({}, "12_0");
  }
  collect();
  { std::ofstream(stem + ".events.jsonl", std::ios::trunc) << "{}\n"; }
  const CollectedEvents collected = collect();
  EXPECT_EQ(collected.applied, 0);
  EXPECT_NE(collected.problem.find("shorter than"), std::string::npos) << collected.problem;
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// Found by run_events_fuzz: a heartbeat whose progress says epoch 1.4e59 made nlohmann cast the
// float to int64_t (undefined behaviour). Numbers out of range now read as missing.
TEST_F(RunEventsTest, NumbersOutOfRangeAreNoUndefinedBehaviour) {
  {
    std::ofstream(stem + ".events.jsonl")
        << R"({"event":"started","pid":1e300,"host":"n"})"
           "\n"
        << R"({"event":"heartbeat","progress":"{\"epoch\":144444444444444444444444444444444444444444444444444444444444,\"step\":3}"})"
           "\n"
        << R"({"event":"epoch","epoch":1e30,"values":{"a":1}})"
           "\n"
        << R"({"event":"epoch","epoch":18446744073709551615,"values":{"a":1}})"
           "\n";
  }
  const CollectedEvents collected = collect();
  EXPECT_EQ(collected.applied, 2);  // the two epochs are skipped, named
  EXPECT_NE(collected.problem.find("not a whole number"), std::string::npos) << collected.problem;
  EXPECT_EQ(store.run(run_id)->pid, getpid());  // 1e300 is no pid: the collector's own stands in
  EXPECT_EQ(RunProgress::from_json(store.run(run_id)->progress).epoch, 0);
  EXPECT_EQ(RunProgress::from_json(store.run(run_id)->progress).step, 3);
}

}  // namespace
}  // namespace trainyard
