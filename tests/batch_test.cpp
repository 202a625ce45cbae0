// A batch of experiment files overnight: every file validated before anything trains, runs counted
// across the batch, a failure policy, early stopping (its --time-limit: tests/plugin_test.cpp).
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "db/sqlite.h"
#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::trainyard;

class BatchTest : public testing::CliTest {
 protected:
  // A small experiment; `extra` goes at the end of the file.
  std::string experiment(const std::string& name, const std::string& extra = "") {
    return dir.write(name + ".yaml", "name: " + name + R"(
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4}
train: {epochs: 2, batch_size: 16, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
)" + extra);
  }
};

// Every problem of every file, at once, before anything runs; nothing is written.
TEST_F(BatchTest, EveryFileIsValidatedBeforeAnythingRuns) {
  const std::string good = experiment("good");
  const std::string bad = dir.write("bad.yaml", R"(
name: bad
model: {name: vit, depht: 2}
dataset: {name: synthetic-images}
train: {epochs: -1}
)");
  const std::string twin = dir.write("twin.yaml", "extends: good.yaml\nname: good\n");
  Result result = trainyard("run " + good + " " + bad + " " + twin + " --db " + db());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("bad.yaml:3"), std::string::npos) << result.output;  // depht
  EXPECT_NE(result.output.find("'model.depht'"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("train.epochs"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("experiment name 'good' is also"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("nothing was run"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(db()));
  Result twice = trainyard("run " + good + " " + good + " --db " + db());
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.output.find("named twice in the batch"), std::string::npos) << twice.output;
}

// Runs are counted across the files of a batch; a second batch skips what completed.
TEST_F(BatchTest, RunsAreCountedAcrossTheBatch) {
  const std::string a = experiment("a", "sweep: {variants: [{name: one}, {name: two}]}\n");
  const std::string b = experiment("b");
  Result result = trainyard("run " + a + " " + b + " --db " + db());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("run 1/3: a/one"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("run 3/3: b/default"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("a, b: 3 completed"), std::string::npos) << result.output;
  // 64 samples and 8 steps at the fine-tuning rate learn nothing the test can see: said, and kept.
  EXPECT_NE(result.output.find("did not learn: test accuracy"), std::string::npos) << result.output;
  {
    Store store(db());
    const auto runs = store.runs("b");
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_NE(store.attributes(runs[0].id)["learning"].find("is at chance (25.0% for 4 classes)"),
              std::string::npos);
  }
  Result again = trainyard("run " + a + " " + b + " --db " + db());
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.output.find("3 already completed"), std::string::npos) << again.output;
}

// Two variants of one config (they differ only in train.checkpoint_every_steps, outside the run's
// identity): the next batch continues each interrupted run once, instead of both variants taking
// the same one and leaving the other interrupted.
TEST_F(BatchTest, TwoRunsOfOneConfigContinueTheirOwnInterruptedRuns) {
  const std::string twins = experiment("twins",
                                       R"(sweep:
  variants:
    - {name: a, set: {dataset.train_size: 30000, train.epochs: 1, train.checkpoint_every_steps: 500}}
    - {name: b, set: {dataset.train_size: 30000, train.epochs: 1, train.checkpoint_every_steps: 700}}
)");
  Result stopped = trainyard("run " + twins + " --db " + db() + " --time-limit 1s");
  ASSERT_EQ(stopped.exit_code, 75) << stopped.output;
  {
    Store store(db());
    const auto runs = store.runs("twins");
    ASSERT_EQ(runs.size(), 2u);
    ASSERT_EQ(runs[0].config_hash, runs[1].config_hash);
    EXPECT_EQ(runs[0].status, RunStatus::interrupted);
    EXPECT_EQ(runs[1].status, RunStatus::interrupted);
  }
  Result rest = trainyard("run " + twins + " --db " + db());
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  Store store(db());
  const auto runs = store.runs("twins");
  ASSERT_EQ(runs.size(), 2u) << rest.output;
  EXPECT_EQ(runs[0].status, RunStatus::completed) << rest.output;
  EXPECT_EQ(runs[1].status, RunStatus::completed) << rest.output;
}

// --on-failure stop: no new run starts after one failed; the rest wait for the next batch.
TEST_F(BatchTest, OnFailureStopLeavesTheRestForLater) {
  const std::string file = experiment(
      "stops", "sweep: {variants: [{name: broken, set: " + testing::failing_data_set(dir) +
                   "}, {name: fine}]}\n");
  Result result = trainyard("run " + file + " --db " + db() + " --on-failure stop");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("stopped after a failure"), std::string::npos) << result.output;
  Store store(db());
  const auto runs = store.runs("stops");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].failure, FailureClass::bad_input);
  EXPECT_EQ(runs[1].failure, FailureClass::not_started);
  Result bad = trainyard("run " + file + " --db " + db() + " --on-failure maybe");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--on-failure is continue or stop"), std::string::npos);
  Result limit = trainyard("run " + file + " --db " + db() + " --time-limit soon");
  EXPECT_EQ(limit.exit_code, 2);
  EXPECT_NE(limit.output.find("9h, 90m, 1h30m or 45s"), std::string::npos) << limit.output;
}

// train.early_stop: an impossible improvement (min_delta 10) stops after `patience` epochs
// without it, and says why.
TEST_F(BatchTest, EarlyStoppingEndsTheRunAndSaysWhy) {
  const std::string file = experiment(
      "early",
      "sweep: {variants: [{name: patient, set: {train.epochs: 6, train.checkpoint: last, "
      "train.early_stop: {metric: val_acc, patience: 2, min_delta: 10}}}]}\n");
  Result result = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  Store store(db());
  const RunRecord run = store.runs("early").at(0);
  EXPECT_EQ(store.epoch_metrics(run.id).size(), 3u);  // epoch 1 sets the mark, 2 and 3 miss it
  EXPECT_NE(store.attributes(run.id).at("end_reason").find("early stop after epoch 3 of 6"),
            std::string::npos);
  EXPECT_EQ(store.final_metrics(run.id).at("best_epoch"), 3);  // checkpoint: last, the last trained
}

// A real allocation failure (a 480 GB layer) is classified out-of-memory and never retried.
TEST_F(BatchTest, OutOfMemoryIsClassifiedAndNeverRetried) {
  // With overcommit_memory 1 the kernel would grant the allocation and the OOM killer act later.
  if (testing::read_file("/proc/sys/vm/overcommit_memory").rfind("1", 0) == 0)
    GTEST_SKIP() << "vm.overcommit_memory is 1: an impossible allocation would not fail at once";
  const std::string file = experiment(
      "oom", "sweep: {variants: [{name: huge, set: {model.width: 200000, model.heads: 1}}]}\n");
  Result result = trainyard("run " + file + " --db " + db() + " --retries 2");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("run failed (out-of-memory)"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("trying again"), std::string::npos) << result.output;
  Store store(db());
  EXPECT_EQ(store.runs("oom").at(0).failure, FailureClass::out_of_memory);
  EXPECT_EQ(store.runs("oom").at(0).resumes, 0);
}

// A run whose loss diverges (NaN) is a run like any other: the controller records it (its NaN
// figures left out: SQLite cannot hold NaN) and the batch goes on, instead of dying on the worker's
// message.
TEST_F(BatchTest, ADivergedRunIsRecordedAndTheBatchGoesOn) {
  const std::string file = experiment(
      "diverges",
      "sweep: {variants: [{name: huge-lr, set: {train.optimizer: {name: adam, lr: 1e30}, "
      "train.log_every: 2}}, {name: fine}]}\n");
  Result result = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("train loss nan"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("-nan"), std::string::npos) << result.output;  // one spelling
  EXPECT_NE(result.output.find("2 completed"), std::string::npos) << result.output;
  Store store(db());
  const auto runs = store.runs("diverges");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, RunStatus::completed) << runs[0].error;
  const auto epochs = store.epoch_metrics(runs[0].id);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_FALSE(epochs[0].values.count("train_loss"));  // NaN: not stored
  EXPECT_TRUE(epochs[0].values.count("train_acc"));
  Result report = trainyard("report --db " + db() + " -o " + (dir.path() / "r.html").string());
  EXPECT_EQ(report.exit_code, 0) << report.output;
}

// A disk that fills up at night (a real one: a 3 MiB tmpfs): the batch ends with a message that
// says so and what to do, no completed run is lost or torn, and once there is room `trainyard run`
// again finishes the batch, every configuration completed once. The same disk read-only: a batch
// is refused, and runs, status and report read the database as it is.
TEST_F(BatchTest, AFullDiskEndsTheBatchClearlyAndLosesNoCompletedRun) {
  const fs::path disk = dir.path() / "disk";
  fs::create_directories(disk);
  if (testing::shell("mount -t tmpfs -o size=3M tmpfs " + disk.string()).exit_code != 0)
    GTEST_SKIP() << "mounting a small tmpfs needs root (the CI container runs as root)";
  struct Unmount {
    fs::path path;
    ~Unmount() { testing::shell("umount -l " + path.string()); }
  } unmount{disk};
  const std::string file = experiment(
      "filling", "sweep: {grid: {train.seed: [" + [] {
        std::string seeds;
        for (int i = 1; i <= 30; ++i) seeds += (i > 1 ? ", " : "") + std::to_string(i);
        return seeds;
      }() + "]}}\n");
  const std::string db = (disk / "runs" / "t.db").string();
  // Weights and a progress line per step: the disk fills after a few runs.
  const std::string filling = " --set train.save_weights=true --set train.log_every=1";
  Result full = trainyard("run " + file + " --db " + db + filling);
  EXPECT_NE(full.exit_code, 0) << full.output;
  // Whichever write met the full disk first — the store's, a checkpoint's, the weights' — the batch
  // ends saying what to do about it, as does the failed run's recorded error.
  const std::string tail =
      full.output.substr(full.output.size() > 3000 ? full.output.size() - 3000 : 0);
  const std::string advice = "the disk holding it is full: free space, then `trainyard run` again";
  EXPECT_NE(full.output.find(advice), std::string::npos) << tail;
  std::istringstream lines(full.output);
  for (std::string line; std::getline(lines, line);)
    if (line.find("run failed") != std::string::npos)
      EXPECT_NE(line.find(advice), std::string::npos) << line;
  int completed = 0;
  {
    Store store(db);
    for (const RunRecord& run : store.runs("filling")) {
      if (run.status == RunStatus::failed)
        EXPECT_NE(run.error.find(advice), std::string::npos) << run.error;
      if (run.status == RunStatus::completed) {
        ++completed;
        EXPECT_TRUE(store.final_metrics(run.id).count("test_acc")) << run.id;
        EXPECT_EQ(store.epoch_metrics(run.id).size(), 2u) << run.id;
      }
    }
  }
  EXPECT_GT(completed, 0);
  EXPECT_LT(completed, 30);
  EXPECT_EQ(testing::shell("sqlite3 " + db + " 'PRAGMA integrity_check'").output, "ok\n");

  ASSERT_EQ(testing::shell("mount -o remount,size=64M " + disk.string()).exit_code, 0);
  Result finish = trainyard("run " + file + " --db " + db + filling);
  EXPECT_EQ(finish.exit_code, 0) << finish.output;
  std::map<std::string, int> completed_per_config;
  for (const RunRecord& run : Store(db).runs("filling"))
    if (run.status == RunStatus::completed) ++completed_per_config[run.config_hash];
  EXPECT_EQ(completed_per_config.size(), 30u);
  for (const auto& [config, count] : completed_per_config) EXPECT_EQ(count, 1) << config;

  // The same disk read-only: refused with the reason, nothing changes.
  const size_t runs_before = Store(db).runs("filling").size();
  ASSERT_EQ(testing::shell("mount -o remount,ro " + disk.string()).exit_code, 0);
  Result read_only = trainyard("run " + file + " --db " + db + " --force");
  EXPECT_NE(read_only.exit_code, 0);
  EXPECT_TRUE(read_only.output.find("Read-only file system") != std::string::npos ||
              read_only.output.find("cannot be written") != std::string::npos)
      << read_only.output;
  // Readers read it as it is (SQLite's WAL mode wants a -shm file even to read, which a read-only
  // file system cannot take: before, every one failed with "unable to open database file").
  for (const std::string& reader :
       std::vector<std::string>{"runs", "status", "report -o " + dir.path().string() + "/r.md"}) {
    Result read = trainyard(reader + " --db " + db);
    EXPECT_EQ(read.exit_code, 0) << reader << ": " << read.output;
    EXPECT_NE(read.output.find("cannot be written"), std::string::npos) << read.output;
  }
  EXPECT_NE(trainyard("runs --db " + db).output.find("completed"), std::string::npos);
  EXPECT_EQ(Store(db, sql::Access::read_only).runs("filling").size(), runs_before);
  testing::shell("mount -o remount,rw " + disk.string());
  EXPECT_EQ(Store(db).runs("filling").size(), runs_before);
}

// More CPU ranks than cores: the run trains, and says that its times measure the machine.
TEST_F(BatchTest, MoreCpuRanksThanCoresTrainWithAWarning) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0 || cores > 8) GTEST_SKIP() << cores << " cores: too many ranks to start here";
  const std::string file =
      experiment("crowded", "sweep: {variants: [{name: many, set: {runtime.devices: " +
                                std::to_string(cores + 1) + ", runtime.strategy: ddp}}]}\n");
  Result result = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find(std::to_string(cores + 1) + " CPU ranks on " +
                               std::to_string(cores) + " cores"),
            std::string::npos)
      << result.output;
}

// One batch per database: a second `trainyard run` on it refuses, naming the first by pid and host,
// and writes nothing; once the first is gone (even SIGKILLed) the lock is free.
TEST_F(BatchTest, ASecondBatchOnTheSameDatabaseRefusesNamingTheFirst) {
  const std::string slow =
      experiment("first", "sweep: {variants: [{name: long, set: {dataset.train_size: 100000}}]}\n");
  const std::string other = experiment("second");
  pid_t controller = testing::start_run(slow, db());
  testing::KillOnExit guard{controller};
  for (int i = 0; i < 600 && !fs::exists(db()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Result second = trainyard("run " + other + " --db " + db());
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_NE(second.output.find("is in use by another `trainyard run` (pid " +
                               std::to_string(controller) + " on "),
            std::string::npos)
      << second.output;
  EXPECT_FALSE(Store(db()).find_experiment("second"));
  // Nor does `rm` remove a run beside it (the batch would fail it when its turn comes).
  Result rm = trainyard("rm --db " + db() + " -e first --yes");
  EXPECT_EQ(rm.exit_code, 2) << rm.output;
  EXPECT_NE(rm.output.find("runs are removed only while no batch records into the database"),
            std::string::npos)
      << rm.output;
  EXPECT_EQ(Store(db()).runs("first").size(), 1u);
  // Saying what would go takes no lock (here: nothing, as nothing has completed).
  EXPECT_EQ(trainyard("rm --db " + db() + " --status completed").exit_code, 0);
  kill(controller, SIGKILL);
  testing::exit_code_of(controller);
  guard.pid = -1;
  Result after = trainyard("run " + other + " --db " + db());
  EXPECT_EQ(after.exit_code, 0) << after.output;
}

// `trainyard status` from another terminal: the running run's progress from the controller's
// heartbeat; once the controller is gone without a word (SIGKILL) and its heartbeat goes stale, the
// run shows as interrupted.
TEST_F(BatchTest, StatusShowsTheRunningRunAndAStaleOneAsInterrupted) {
  const std::string file = experiment(
      "watched",
      R"(sweep: {variants: [{name: long, set: {dataset.train_size: 100000, train.log_every: 5}}, {name: next}]}
)");
  pid_t controller = testing::start_run(file, db());
  testing::KillOnExit guard{controller};
  const Result status = testing::status_showing(db(), "samples/s");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("watched/long: running, epoch 1/2, step"), std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("queued next: watched/next"), std::string::npos) << status.output;
  kill(controller, SIGKILL);
  testing::exit_code_of(controller);
  Result gone = trainyard("status --db " + db());  // a controller of this host: known at once
  EXPECT_NE(gone.output.find("watched/long: interrupted: its controller"), std::string::npos)
      << gone.output;
  EXPECT_NE(gone.output.find(": 1 interrupted, 1 queued\n"), std::string::npos)  // counted so too
      << gone.output;
  {  // another host's controller, an hour quiet as far as the heartbeat says
    sql::Database raw(db());
    raw.exec(
        "UPDATE runs SET heartbeat_at = '2000-01-01T00:00:00Z', host = 'elsewhere' "
        "WHERE status = 'running'");
  }
  Result stale = trainyard("status --db " + db());
  EXPECT_NE(stale.output.find("watched/long: interrupted: no heartbeat for"), std::string::npos)
      << stale.output;
  EXPECT_EQ(trainyard("status --db " + (dir.path() / "none.db").string()).exit_code, 2);
  Result runs = trainyard("runs --db " + db());  // runs and rm take it for what status shows
  EXPECT_NE(runs.output.find("long                     interrupted"), std::string::npos)
      << runs.output;
  // rm takes the lost run for what status shows: interrupted, and removable.
  Result plan = trainyard("rm --db " + db() + " --status interrupted");
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("watched / long (interrupted)"), std::string::npos) << plan.output;
  Result removed = trainyard("rm --db " + db() + " --status interrupted --yes");
  EXPECT_EQ(removed.exit_code, 0) << removed.output;
  const auto left = Store(db()).runs("watched");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].variant, "next");
}

// A controller killed after it named a run's files (and wrote its config beside them) but before it
// opened the run's log leaves a run that trained nothing: the next batch starts it afresh under its
// id and those names, which are its own — not a second run beside a failed "file exists" one.
// (Found by the chaos test.)
TEST_F(BatchTest, ARunKilledBeforeItsLogOpenedStartsAfreshUnderItsId) {
  const std::string file = experiment("early");
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  const RunRecord done = Store(db()).runs("early").at(0);
  const std::string stem = run_files_stem(done);
  ASSERT_TRUE(fs::exists(stem + ".yaml"));
  // That moment's state: recorded with its log's name, its config written, no log, no results.
  fs::remove(done.environment.log_path);
  {
    sql::Database raw(db());
    raw.exec("UPDATE runs SET status = 'interrupted', failure_class = 'interrupted' WHERE id = " +
             std::to_string(done.id));
    for (const char* table : {"final_metrics", "epoch_metrics"})
      raw.exec(std::string("DELETE FROM ") + table + " WHERE run_id = " + std::to_string(done.id));
  }
  Result again = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  const auto runs = Store(db()).runs("early");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].id, done.id);
  EXPECT_EQ(runs[0].status, RunStatus::completed) << runs[0].error;
  EXPECT_EQ(runs[0].environment.log_path, done.environment.log_path);
  EXPECT_TRUE(fs::exists(done.environment.log_path));
  EXPECT_FALSE(Store(db()).final_metrics(done.id).empty());
}

}  // namespace
}  // namespace trainyard
