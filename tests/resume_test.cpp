// Runs continue where they stopped: a run whose controller is SIGKILLed, that is stopped with
// Ctrl-C, or whose rank crashes continues from its last checkpoint under its own id, and ends with
// weights and every stored figure bit for bit those of the uninterrupted run (wall-clock figures
// aside) — under every strategy. Real processes, real signals.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::exit_code_of;
using testing::KillOnExit;
using testing::Result;
using testing::start_run;
using testing::trainyard;

// The files a run's checkpoints leave behind in `logs`.
std::vector<std::string> leftover_states(const fs::path& logs) {
  std::vector<std::string> left;
  if (!fs::exists(logs)) return left;
  for (const auto& entry : fs::recursive_directory_iterator(logs)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".state") != std::string::npos || name.find(".tmp") != std::string::npos)
      left.push_back(entry.path().string());
  }
  return left;
}

// The batch within epoch `epoch` + 1 at which the newest checkpoint under `logs` stands (> 0 once
// the run checkpointed mid-epoch), or -1 when it is elsewhere or there is none.
int64_t checkpoint_batch(const fs::path& logs, int64_t epoch) {
  const auto [done, batch] = testing::checkpoint_position(logs);
  return done == epoch ? batch : -1;
}

class ResumeTest : public testing::CliTest {
 protected:
  // 3 epochs of 32 batches per rank, dropout on (the random state must carry over), a checkpoint
  // every 5 optimizer steps; the tested weights saved, to compare them.
  std::string experiment(const std::string& strategy, int devices) {
    const int batch = 16 / devices;  // the same global batch under every strategy
    return dir.write("resume-" + strategy + ".yaml", fmt::format(R"(
name: resume-{0}
model: {{name: vit, image_size: 16, patch_size: 4, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 4, dropout: 0.1}}
dataset: {{name: synthetic-images, train_size: 512, val_size: 64, test_size: 64, num_classes: 4, noise: 0.3}}
train: {{epochs: 3, batch_size: {2}, optimizer: {{name: adamw, lr: 3.0e-3}}, log_every: 8, checkpoint_every_steps: 5,
        save_weights: true}}
runtime: {{accelerator: cpu, threads: 1, strategy: {0}, devices: {1}}}
)",
                                                                 strategy, devices, batch));
  }
  fs::path logs() const { return dir.path() / "runs" / "logs"; }
  // Starts `file`'s batch and SIGKILLs its controller once a checkpoint lies inside epoch 2: the
  // controller's exit status, or nothing when no such checkpoint came (the batch is then killed).
  std::optional<int> killed_inside_epoch_2(const std::string& file) {
    pid_t controller = start_run(file, db());
    KillOnExit guard{controller};
    bool mid_epoch = false;
    for (int i = 0; i < 1200 && !mid_epoch; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      mid_epoch = checkpoint_batch(logs(), 1) > 0;
    }
    if (!mid_epoch) return std::nullopt;
    kill(controller, SIGKILL);
    guard.pid = -1;
    return exit_code_of(controller);
  }
};

class EveryStrategy : public ResumeTest,
                      public ::testing::WithParamInterface<std::pair<const char*, int>> {};

// SIGKILL to the controller (its workers die with it) in the middle of epoch 2, after a mid-epoch
// checkpoint: the next `trainyard run` continues that run from the checkpoint, and every figure is
// the undisturbed run's, bit for bit.
TEST_P(EveryStrategy, KilledControllerContinuesBitForBit) {
  const auto [strategy, devices] = GetParam();
  const std::string file = experiment(strategy, devices);
  const std::string undisturbed_db = (dir.path() / "undisturbed.db").string();
  Result undisturbed = trainyard("run " + file + " --db " + undisturbed_db);
  ASSERT_EQ(undisturbed.exit_code, 0) << undisturbed.output;

  const std::optional<int> killed = killed_inside_epoch_2(file);
  ASSERT_TRUE(killed) << "no mid-epoch checkpoint in epoch 2";
  EXPECT_EQ(*killed, 128 + SIGKILL);

  Result again = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("continues from its checkpoint at epoch 2"), std::string::npos)
      << again.output;
  const std::string name = std::string("resume-") + strategy;
  testing::expect_same_training(db(), undisturbed_db);
  Store store(db());
  ASSERT_EQ(store.runs(name).size(), 1u);  // the same run, continued: completed exactly once
  EXPECT_EQ(store.runs(name)[0].resumes, 1);
  EXPECT_TRUE(store.final_metrics(store.runs(name)[0].id).count("train_seconds"));
  EXPECT_EQ(leftover_states(logs()), std::vector<std::string>());  // removed once completed
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategy,
                         ::testing::Values(std::pair{"single", 1}, std::pair{"ddp", 2},
                                           std::pair{"zero2", 2}, std::pair{"fsdp", 2}),
                         [](const auto& info) { return std::string(info.param.first); });

// runtime.threads 0: a run killed and continued trains on with the threads it chose when it
// started (other threads sum in another order: a machine whose CPUs changed), and its details say
// so.
TEST_F(ResumeTest, AContinuedRunKeepsTheThreadsItChoseWhenItStarted) {
  std::string text = testing::read_file(experiment("single", 1));
  text.replace(text.find("threads: 1"), 10, "threads: 0");
  const std::string file = dir.write("resume-single.yaml", text);
  ASSERT_TRUE(killed_inside_epoch_2(file)) << "no mid-epoch checkpoint in epoch 2";
  Store before(db());
  EXPECT_NE(
      before.attributes(before.runs("resume-single")[0].id)["threads"].find("usable CPUs / 1 rank"),
      std::string::npos);
  Result again = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  Store store(db());
  const std::string threads = store.attributes(store.runs("resume-single")[0].id)["threads"];
  EXPECT_NE(threads.find("(runtime.threads 0: as the run chose when it started)"),
            std::string::npos)
      << threads;
}

// Ctrl-C: one process writes a checkpoint where it stands before it stops; the run is recorded
// interrupted and the next `trainyard run` continues it exactly.
TEST_F(ResumeTest, CtrlCCheckpointsWhereTheRunStandsAndTheNextRunContinues) {
  const std::string file = experiment("single", 1);
  const std::string undisturbed_db = (dir.path() / "undisturbed.db").string();
  ASSERT_EQ(trainyard("run " + file + " --db " + undisturbed_db).exit_code, 0);
  pid_t controller = start_run(file, db(), {"--set", "train.checkpoint_every_steps=0"});
  KillOnExit guard{controller};
  bool training = false;
  for (int i = 0; i < 1200 && !training; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    training = checkpoint_batch(logs(), 1) == 0;  // epoch 1 done, epoch 2 under way
  }
  ASSERT_TRUE(training);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(controller, SIGINT);
  EXPECT_EQ(exit_code_of(controller), 130);
  {
    Store store(db());
    ASSERT_EQ(store.runs("resume-single").size(), 1u);
    EXPECT_EQ(store.runs("resume-single")[0].status, RunStatus::interrupted);
    EXPECT_EQ(store.runs("resume-single")[0].failure, FailureClass::interrupted);
  }
  // `trainyard rm` would take the interrupted run's checkpoint with it (here it only says so).
  Result plan = trainyard("rm --db " + db() + " -e resume-single");
  EXPECT_NE(plan.output.find(".state"), std::string::npos) << plan.output;
  Result again = trainyard("run " + file + " --db " + db() +
                           " --set train.checkpoint_every_steps=0");  // not part of its identity
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("continues from its checkpoint"), std::string::npos) << again.output;
  testing::expect_same_training(db(), undisturbed_db);
}

// A rank killed by a signal is a transient failure: --retries tries the run again from its
// checkpoint, and it ends as the undisturbed run. Without --retries it is recorded as crashed, and
// the next `trainyard run` continues it.
TEST_F(ResumeTest, CrashedRankIsRetriedFromItsCheckpoint) {
  const std::string file = experiment("ddp", 2);
  const std::string undisturbed_db = (dir.path() / "undisturbed.db").string();
  ASSERT_EQ(trainyard("run " + file + " --db " + undisturbed_db).exit_code, 0);
  auto kill_rank_one_mid_run = [&](pid_t controller) {
    for (int i = 0; i < 1200 && checkpoint_batch(logs(), 1) <= 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    for (pid_t worker : testing::children_of(controller))
      if (testing::rank_of(worker) == 1) kill(worker, SIGKILL);
  };

  pid_t controller = start_run(file, db(), {"--retries", "2"});
  KillOnExit guard{controller};
  kill_rank_one_mid_run(controller);
  EXPECT_EQ(exit_code_of(controller), 0);
  testing::expect_same_training(db(), undisturbed_db);
  Store store(db());
  ASSERT_EQ(store.runs("resume-ddp").size(), 1u);
  EXPECT_EQ(store.runs("resume-ddp")[0].resumes, 1);
  const std::string log = testing::read_file(store.runs("resume-ddp")[0].environment.log_path);
  EXPECT_NE(log.find("run failed (crashed), trying again (1 of 2): rank 1 was killed by signal 9"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("-rank1.log:\n  "), std::string::npos) << log;  // with its log's last lines

  // Without retries: recorded as crashed; the next batch continues the same run.
  const std::string other_db = (dir.path() / "runs" / "other.db").string();  // the same logs/
  pid_t second = start_run(file, other_db);
  KillOnExit second_guard{second};
  kill_rank_one_mid_run(second);
  EXPECT_EQ(exit_code_of(second), 1);
  {
    Store crashed(other_db);
    ASSERT_EQ(crashed.runs("resume-ddp").size(), 1u);
    EXPECT_EQ(crashed.runs("resume-ddp")[0].failure, FailureClass::crashed);
  }
  Result again = trainyard("run " + file + " --db " + other_db);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  testing::expect_same_training(other_db, undisturbed_db);
  EXPECT_EQ(Store(other_db).runs("resume-ddp").size(), 1u);
}

// Bad input fails at once and is never retried, whatever --retries says; its class is stored.
TEST_F(ResumeTest, BadInputIsNeverRetried) {
  const std::string file = dir.write(
      "resume-single.yaml",
      testing::read_file(experiment("single", 1)) +
          "sweep: {variants: [{name: broken, set: " + testing::failing_data_set(dir) + "}]}\n");
  Result result = trainyard("run " + file + " --db " + db() + " --retries 3");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  Store store(db());
  ASSERT_EQ(store.runs("resume-single").size(), 1u);
  EXPECT_EQ(store.runs("resume-single")[0].failure, FailureClass::bad_input);
  EXPECT_EQ(store.runs("resume-single")[0].resumes, 0);
  EXPECT_EQ(result.output.find("trying again"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace trainyard
