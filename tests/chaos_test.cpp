// The chaos test (CTest label "chaos"): a batch of three experiment files — 30 small runs, 2-rank
// ddp, zero2 and fsdp among them — with SIGKILL sent at random moments to the controller and to
// random workers, started again and again until it finishes. Then every run completed exactly
// once, with every figure bit for bit that of an undisturbed batch, the database is intact, and no
// process or temporary file is left behind.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "db/sqlite.h"
#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::exit_code_of;
using testing::Result;
using testing::trainyard;

// Processes whose command line mentions `text` (our folder): none may outlive the batch.
std::vector<std::string> processes_mentioning(const std::string& text) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find(text) != std::string::npos) found.push_back(pid + ": " + cmdline);
  }
  return found;
}

// Checkpoints, staged checkpoints and half-written files under `folder`.
std::vector<std::string> temporary_files(const fs::path& folder) {
  std::vector<std::string> left;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    for (const char* mark : {".state", ".new", ".tmp"})
      if (name.find(mark) != std::string::npos) left.push_back(entry.path().string());
  }
  return left;
}

class ChaosTest : public testing::CliTest {
 protected:
  // 3 files, 30 runs: every strategy (2-rank ones included) x 3 seeds, two precisions x 4 seeds,
  // a learning-rate x batch-size grid. Dropout on, checkpoints every 2 steps.
  std::vector<std::string> batch() {
    const std::string common = R"(
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4, dropout: 0.1}
dataset: {name: synthetic-images, train_size: 96, val_size: 32, test_size: 32, num_classes: 4, noise: 0.3}
train: {epochs: 2, batch_size: 16, log_every: 1000, checkpoint_every_steps: 2}
runtime: {accelerator: cpu, threads: 1}
)";
    return {dir.write("strategies.yaml", "name: chaos-strategies" + common + R"(
sweep:
  repeats: 3
  variants:
    - name: single
    - {name: ddp, set: {runtime.strategy: ddp, runtime.devices: 2, train.batch_size: 8}}
    - {name: zero2, set: {runtime.strategy: zero2, runtime.devices: 2, train.batch_size: 8}}
    - {name: fsdp, set: {runtime.strategy: fsdp, runtime.devices: 2, train.batch_size: 8}}
)"),
            dir.write("precisions.yaml", "name: chaos-precisions" + common + R"(
sweep:
  repeats: 4
  variants:
    - name: fp32
    - {name: bf16, set: {runtime.precision: bf16-mixed}}
)"),
            dir.write("grid.yaml", "name: chaos-grid" + common + R"(
sweep:
  grid:
    train.optimizer.lr: [0.001, 0.002, 0.003, 0.004, 0.005]
    train.batch_size: [8, 16]
)")};
  }
};

TEST_F(ChaosTest, KilledAgainAndAgainTheBatchEndsAsAnUndisturbedOne) {
  const std::vector<std::string> files = batch();
  std::string names;
  for (const auto& file : files) names += " " + file;
  const std::string undisturbed_db = (dir.path() / "undisturbed" / "u.db").string();
  const auto started = std::chrono::steady_clock::now();
  Result undisturbed = trainyard("run" + names + " --db " + undisturbed_db);
  ASSERT_EQ(undisturbed.exit_code, 0) << undisturbed.output;
  // A run's time on this machine as loaded now (beside other tests, it is several times longer):
  // the kills come at random in its units, so a batch goes on making progress between them.
  const int run_ms = static_cast<int>(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
          .count() /
      30);
  std::map<std::string, int> planned;
  const auto expected = testing::training_figures(undisturbed_db, &planned);
  ASSERT_EQ(planned.size(), 30u);

  const unsigned seed = std::random_device{}();
  std::mt19937 random(seed);
  SCOPED_TRACE(fmt::format("chaos seed {}, {} ms a run undisturbed", seed, run_ms));
  int controller_kills = 0, worker_kills = 0, attempts = 0, last_exit = -1;
  bool finished = false;
  auto pause = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(
        std::max(150, run_ms * 3 / 20), std::max(1500, run_ms * 3 / 2))(random)));
  };
  while (!finished && attempts < 300) {
    ++attempts;
    pid_t controller = testing::start_run(files[0], db(), {files[1], files[2], "--retries", "1"});
    testing::KillOnExit guard{controller};
    // Within one batch: now and then a rank dies (the controller retries or records it), until
    // the controller itself is killed or the batch ends.
    while (true) {
      pause();
      int status = 0;
      if (waitpid(controller, &status, WNOHANG) == controller) {
        finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        last_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      const auto workers = testing::children_of(controller);
      if (!workers.empty() && random() % 3 != 0) {
        kill(workers[random() % workers.size()], SIGKILL);
        ++worker_kills;
        continue;
      }
      kill(controller, SIGKILL);  // its workers die with it
      exit_code_of(controller);
      ++controller_kills;
      break;
    }
  }
  ASSERT_TRUE(finished) << attempts << " attempts; the last batch that ended exited " << last_exit
                        << "; the runs:\n"
                        << trainyard("runs --db " + db()).output;
  if (!finished) return;
  // Whatever was killed last, one more batch must find nothing left to do.
  Result last = trainyard("run" + names + " --db " + db());
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_NE(last.output.find("30 already completed"), std::string::npos) << last.output;
  std::cout << fmt::format("chaos: {} batches, {} controller kills, {} worker kills (seed {})\n",
                           attempts, controller_kills, worker_kills, seed);

  std::map<std::string, int> held;
  const auto got = testing::training_figures(db(), &held);
  int differences = 0;  // each one named, not two maps in full
  for (const auto& [key, value] : expected) {
    auto it = got.find(key);
    if (it != got.end() && it->second == value) continue;
    if (++differences <= 20)
      ADD_FAILURE() << key << ": undisturbed " << fmt::format("{:.17g}", value) << ", chaos "
                    << (it == got.end() ? std::string("missing")
                                        : fmt::format("{:.17g}", it->second));
  }
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_EQ(differences, 0);
  EXPECT_EQ(held.size(), 30u);
  for (const auto& [config, count] : held) EXPECT_EQ(count, 1) << config << " has several runs";
  // A config with several runs: what ended the extra ones says which path made a new run.
  for (const RunRecord& run : Store(db()).runs())
    if (held[run.experiment + "/" + run.variant + "/" + run.config_hash] > 1)
      ADD_FAILURE() << "run " << run.id << " " << run.experiment << "/" << run.variant << ": "
                    << to_string(run.status) << " (" << to_string(run.failure) << ") " << run.error;
  {
    sql::Database raw(db());
    auto check = raw.prepare("PRAGMA integrity_check");
    ASSERT_TRUE(check.step());
    EXPECT_EQ(check.column_text(0), "ok");
  }
  EXPECT_EQ(processes_mentioning(dir.path().string()), std::vector<std::string>());
  EXPECT_EQ(temporary_files(dir.path() / "runs" / "logs"), std::vector<std::string>());
}

}  // namespace
}  // namespace trainyard
