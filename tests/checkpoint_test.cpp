// Training-state folders, end to end: a run resumes exactly where it stopped, under any strategy
// and world size, and keeps its best epoch's weights.
#include <gtest/gtest.h>

#include <filesystem>

#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::trainyard;

class CheckpointTest : public testing::CliTest {};

// Training state is saved whole, per parameter: a run resumes exactly where it stopped, and a
// 4-rank fsdp state resumes (or is evaluated) under another strategy and world size.
TEST_F(CheckpointTest, TrainingStateResumesUnderAnyStrategyAndWorldSize) {
  std::string file = dir.write("resume.yaml", R"(
name: resume
model: {name: vit, image_size: 16, patch_size: 4, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 128, val_size: 64, test_size: 64, num_classes: 4, noise: 0.3}
# A constant learning rate, so that 2 epochs are the first 2 of 3 (a schedule spans train.epochs:
# resuming with the run's own train.epochs continues its schedule exactly).
train: {epochs: 3, batch_size: 16, optimizer: {name: adamw, lr: 3.0e-3}, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: single-3-epochs
    - name: single-first-2
      set: {train.epochs: 2, train.save_state: true}
    - name: fsdp-4-ranks-3-epochs
      set: {train.batch_size: 4, runtime.strategy: fsdp, runtime.devices: 4}
    - name: fsdp-4-ranks-first-2
      set: {train.epochs: 2, train.batch_size: 4, train.save_state: true, runtime.strategy: fsdp, runtime.devices: 4}
)");
  Result first = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  Store store(db());
  auto runs = store.runs("resume");
  ASSERT_EQ(runs.size(), 4u);
  auto test_loss = [&](const RunRecord& r) { return store.final_metrics(r.id).at("test_loss"); };
  const std::string single_state = store.attributes(runs[1].id).at("state_path");
  const std::string fsdp_state = store.attributes(runs[3].id).at("state_path");
  EXPECT_TRUE(fs::exists(fs::path(fsdp_state) / "model.safetensors"));

  auto resume = [&](const std::string& state, const std::string& name, const std::string& sets) {
    std::string variant =
        dir.write(name + ".yaml",
                  "extends: resume.yaml\nname: " + name + "\nsweep: {variants: [{name: " + name +
                      ", set: {train.resume_from: '" + state + "', " + sets + "}}]}\n");
    Result run = trainyard("run " + variant + " --db " + db());
    EXPECT_EQ(run.exit_code, 0) << run.output;
    auto resumed = store.runs(name);
    return resumed.empty() ? -1.0 : test_loss(resumed[0]);
  };
  // The same strategy: exactly where it stopped (weights, AdamW moments and steps, the schedule).
  EXPECT_NEAR(resume(single_state, "single-resumed", "train.epochs: 3"), test_loss(runs[0]), 1e-6);
  // 4 fsdp ranks' state on 1 process and on 2 ddp ranks (global batch 16 throughout): the same
  // training up to float summation order.
  EXPECT_NEAR(resume(fsdp_state, "fsdp-on-single", "train.epochs: 3"), test_loss(runs[2]), 5e-4);
  EXPECT_NEAR(
      resume(fsdp_state, "fsdp-on-ddp",
             "train.epochs: 3, runtime.strategy: ddp, runtime.devices: 2, train.batch_size: 8"),
      test_loss(runs[2]), 5e-4);
  // Nothing left to train: the state's model evaluated on 1 and 2 ranks scores as the 4-rank run
  // did.
  EXPECT_NEAR(resume(fsdp_state, "fsdp-evaluated", "train.epochs: 2"), test_loss(runs[3]), 1e-6);
  EXPECT_NEAR(
      resume(fsdp_state, "fsdp-evaluated-2",
             "train.epochs: 2, runtime.strategy: fsdp, runtime.devices: 2, train.batch_size: 8"),
      test_loss(runs[3]), 1e-6);

  // A folder that is not a training state fails the run with the reason, and nothing else.
  Result bad = trainyard("run " + file + " --db " + db() +
                         " --set train.resume_from=" + dir.path().string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("has no trainer_state.json"), std::string::npos) << bad.output;
  // A folder that does not exist is refused before any run starts: nothing is recorded.
  const size_t recorded = store.runs().size();
  Result missing = trainyard("run " + file + " --db " + db() +
                             " --set train.resume_from=" + (dir.path() / "no-such.state").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("train.resume_from: no such folder"), std::string::npos)
      << missing.output;
  EXPECT_EQ(store.runs().size(), recorded);
}

// A run resumed from its best epoch tests that epoch's weights when later epochs do worse, as the
// uninterrupted run does (checkpoint: best).
TEST_F(CheckpointTest, AResumedRunKeepsTheBestEpochsWeights) {
  std::string file = dir.write("best.yaml", R"(
name: best
model: {name: vit, image_size: 16, patch_size: 4, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 128, val_size: 64, test_size: 64, num_classes: 4, noise: 0.6}
train: {epochs: 3, batch_size: 16, optimizer: {name: adamw, lr: 1.0e-2}, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: straight
    - name: first-2
      set: {train.epochs: 2, train.save_state: true}
)");
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  Store store(db());
  auto runs = store.runs("best");
  auto straight = store.final_metrics(runs[0].id);
  ASSERT_EQ(straight.at("best_epoch"),
            2);  // epoch 3 validates worse: the test uses epoch 2's weights
  const std::string state = store.attributes(runs[1].id).at("state_path");
  Result resumed = trainyard("run " + file + " --db " + db() + " --set train.resume_from=" + state);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto again = store.runs("best");
  auto metrics = store.final_metrics(again[2].id);
  EXPECT_EQ(metrics.at("best_epoch"), 2);
  EXPECT_NEAR(metrics.at("test_loss"), straight.at("test_loss"), 1e-6);
}

}  // namespace
}  // namespace trainyard
