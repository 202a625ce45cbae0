// The controller, end to end: a failing run is recorded and the batch goes on; Ctrl-C marks the run
// interrupted and exits 130.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::KillOnExit;
using testing::Result;
using testing::start_run;
using testing::trainyard;

class ControllerTest : public testing::CliTest {};

// Whether this machine has an NVIDIA GPU, asked of its device node rather than of Trainyard.
bool machine_has_a_gpu() { return fs::exists("/dev/nvidia0"); }

// A CIFAR-10 folder whose files are all there (validation passes) but truncated: the run that
// reads them fails, is recorded with the reason, and the batch goes on.
TEST_F(ControllerTest, FailingRunIsRecordedAndTheBatchGoesOn) {
  for (const auto& name : testing::kCifar10Files)
    dir.write("truncated-cifar/" + name, std::string(100, 'x'));
  std::string yaml = R"(
name: mixed
model: {name: vit, image_size: 16, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 16, num_classes: 10}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32}
train: {epochs: 1, batch_size: 16}
runtime: {accelerator: cpu}
sweep:
  variants:
    - name: broken
      set: {dataset: {name: cifar10, root: TRUNCATED}}
    - name: gpu
      set: {runtime.accelerator: cuda}
    - name: fine
)";
  yaml.replace(yaml.find("TRUNCATED"), 9, (dir.path() / "truncated-cifar").string());
  const std::string file = dir.write("mixed.yaml", yaml);
  Result run = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  Store store(db());
  auto runs = store.runs("mixed");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_NE(runs[0].error.find("data_batch_1.bin: 100 bytes is not a whole number"),
            std::string::npos)
      << runs[0].error;
  EXPECT_EQ(runs[1].variant, "gpu");
  if (machine_has_a_gpu()) {
    EXPECT_EQ(runs[1].status, RunStatus::completed) << runs[1].error;
  } else {
    EXPECT_EQ(runs[1].status, RunStatus::skipped);
    EXPECT_EQ(runs[1].error, "needs a CUDA device; this machine has none");
  }
  EXPECT_EQ(runs[2].status, RunStatus::completed);
}

TEST_F(ControllerTest, CtrlCMarksTheRunInterrupted) {
  std::string file = dir.write("long.yaml", R"(
name: long
model: {name: vit, image_size: 32, patch_size: 8, depth: 2, width: 64, heads: 4, mlp_dim: 128, num_classes: 10}
dataset: {name: synthetic-images, train_size: 100000, val_size: 32, test_size: 32}
train: {epochs: 5, batch_size: 16}
runtime: {accelerator: cpu}
)");
  pid_t child = start_run(file, db());
  KillOnExit guard{child};
  // Wait until the run is training, then press Ctrl-C.
  bool running = false;
  for (int i = 0; i < 600 && !running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!fs::exists(db())) continue;
    Store store(db());
    auto runs = store.runs("long");
    running = !runs.empty() && runs[0].status == RunStatus::running;
  }
  ASSERT_TRUE(running);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(child, SIGINT);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  Store store(db());
  EXPECT_EQ(store.runs("long")[0].status, RunStatus::interrupted);
}

}  // namespace
}  // namespace trainyard
