// End to end: the trainyard executable on real experiment files, into temporary databases.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "db/store.h"
#include "tests/test_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result trainyard(const std::string& args) {
  std::string command = std::string(TRAINYARD_EXE) + " " + args + " 2>&1";
  Result result;
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string source(const std::string& relative) { return std::string(TRAINYARD_SOURCE_DIR) + "/" + relative; }

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Kills a forked trainyard (and, through PR_SET_PDEATHSIG, its workers) when a test ends early.
struct KillOnExit {
  pid_t pid;
  ~KillOnExit() {
    if (pid > 0 && kill(pid, 0) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// Starts `trainyard run FILE --db DB` in the background, its output discarded.
pid_t start_run(const std::string& file, const std::string& db) {
  pid_t child = fork();
  if (child == 0) {
    freopen("/dev/null", "w", stderr);
    freopen("/dev/null", "w", stdout);
    execl(TRAINYARD_EXE, TRAINYARD_EXE, "run", file.c_str(), "--db", db.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return child;
}

class CliTest : public ::testing::Test {
 protected:
  std::string db() const { return (dir.path() / "runs" / "t.db").string(); }
  testing::TempDir dir;
};

TEST_F(CliTest, QuickstartRunsIntoTheDatabaseAndTheReport) {
  Result run = trainyard("run " + source("experiments/quickstart.yaml") + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("quickstart: 3 completed"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("database: "), std::string::npos);

  {
    Store store(db());
    auto runs = store.runs("quickstart");
    ASSERT_EQ(runs.size(), 3u);
    for (const auto& r : runs) {
      EXPECT_EQ(r.status, RunStatus::completed) << r.variant << ": " << r.error;
      auto metrics = store.final_metrics(r.id);
      for (const char* key : {"train_seconds", "test_acc", "samples_per_s", "peak_memory_bytes"})
        EXPECT_GT(metrics.count(key) ? metrics.at(key) : 0, 0) << r.variant << " " << key;
      EXPECT_EQ(store.epoch_metrics(r.id).size(), 3u);
      EXPECT_TRUE(fs::exists(r.environment.log_path)) << r.environment.log_path;
      EXPECT_NE(r.config_yaml.find("precision: " + r.precision), std::string::npos);
      EXPECT_EQ(r.environment.torch_version.substr(0, 2), "2.");
    }
    EXPECT_EQ(runs[0].variant, "fp32");
    EXPECT_GT(store.final_metrics(runs[0].id).at("test_acc"), 0.5);  // it learned something
  }

  fs::path html = dir.path() / "out" / "report.html";
  Result report = trainyard("report --db " + db() + " -o " + html.string());
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::string page = read_file(html);
  for (const char* text : {"Quickstart — ViT on synthetic images (CPU)", "bf16-mixed", "batch-64-adamw-cosine",
                           "1.00x", "speedup", "<svg", "LibTorch 2."})
    EXPECT_NE(page.find(text), std::string::npos) << text;

  Result again = trainyard("run " + source("experiments/quickstart.yaml") + " --db " + db() + " --set train.epochs=3");
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.output.find("0 completed, 3 already completed"), std::string::npos) << again.output;

  Result listing = trainyard("runs --db " + db());
  EXPECT_EQ(listing.exit_code, 0);
  EXPECT_NE(listing.output.find("batch-64-adamw-cosine"), std::string::npos);
}

TEST_F(CliTest, BadConfigExitsTwoAndWritesNothing) {
  std::string file = dir.write("bad.yaml", "extends: " + source("experiments/quickstart.yaml") +
                                               "\ntrain:\n  epcohs: 2\n  batch_size: -1\n");
  Result run = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("bad.yaml:3:3: error: unknown key 'train.epcohs'"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("bad.yaml:4:15: error: 'train.batch_size' must be ≥ 1, got -1"), std::string::npos);
  EXPECT_NE(run.output.find("2 errors"), std::string::npos);
  EXPECT_FALSE(fs::exists(db()));
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
}

TEST_F(CliTest, DryRunPrintsTheResolvedRunsAndTouchesNothing) {
  Result run = trainyard("run " + source("experiments/quickstart.yaml") + " --dry-run --set train.epochs=1 --db " + db());
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.output.find("--- run 2/3: bf16-mixed"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("epochs: 1"), std::string::npos);
  EXPECT_FALSE(fs::exists(db()));
}

TEST_F(CliTest, FailingRunIsRecordedAndTheBatchGoesOn) {
  std::string file = dir.write("mixed.yaml", R"(
name: mixed
model: {name: vit, image_size: 16, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 16, num_classes: 10}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32}
train: {epochs: 1, batch_size: 16}
runtime: {accelerator: cpu}
sweep:
  variants:
    - name: broken
      set: {dataset: {name: cifar10, root: /no/such/cifar}}
    - name: gpu
      set: {runtime.accelerator: cuda}
    - name: fine
)");
  Result run = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  Store store(db());
  auto runs = store.runs("mixed");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_NE(runs[0].error.find("cifar10: no such folder '/no/such/cifar'"), std::string::npos) << runs[0].error;
  EXPECT_EQ(runs[1].variant, "gpu");
  if (runs[1].status == RunStatus::skipped) EXPECT_EQ(runs[1].error, "needs a CUDA device; this machine has none");
  EXPECT_EQ(runs[2].status, RunStatus::completed);
}

TEST_F(CliTest, CtrlCMarksTheRunInterrupted) {
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

TEST_F(CliTest, ReferenceStudiesValidateAndSkipWhatThisMachineLacks) {
  for (const char* file : {"experiments/vit_cifar10.yaml", "experiments/distilbert_imdb.yaml"}) {
    Result validate = trainyard(std::string("validate ") + source(file));
    EXPECT_EQ(validate.exit_code, 0) << validate.output;
    EXPECT_NE(validate.output.find("5 runs"), std::string::npos) << validate.output;
  }
  Result run = trainyard("run " + source("experiments/distilbert_imdb.yaml") + " --db " + db() +
                         " --set runtime.accelerator=cuda");
  Store store(db());
  auto runs = store.runs("distilbert_imdb");
  ASSERT_EQ(runs.size(), 5u) << run.output;
  if (runs[0].status == RunStatus::skipped) {  // no GPU here: every run (fp32 ... 4-GPU fsdp) is skipped
    for (const auto& r : runs) EXPECT_EQ(r.error, "needs a CUDA device; this machine has none") << r.variant;
    EXPECT_EQ(run.exit_code, 0) << run.output;
  }
}

// The pids of the direct children of `parent`, from /proc.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(std::stoi(name));
  }
  return out;
}

TEST_F(CliTest, AKilledRankFailsItsRunAndTheBatchGoesOn) {
  std::string file = dir.write("kill.yaml", R"(
name: kill
model: {name: vit, image_size: 32, patch_size: 8, depth: 2, width: 64, heads: 4, mlp_dim: 128, num_classes: 10}
dataset: {name: synthetic-images, train_size: 100000, val_size: 32, test_size: 32}
train: {epochs: 5, batch_size: 16}
runtime: {accelerator: cpu}
sweep:
  variants:
    - name: victim
    - name: next
      set: {dataset.train_size: 64}
)");
  pid_t controller = start_run(file, db());
  KillOnExit guard{controller};
  std::vector<pid_t> workers;
  for (int i = 0; i < 600 && workers.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    workers = children_of(controller);
  }
  ASSERT_EQ(workers.size(), 1u);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto killed_at = std::chrono::steady_clock::now();
  kill(workers[0], SIGKILL);
  int status = 0;
  waitpid(controller, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 1);  // a run failed
  Store store(db());
  auto runs = store.runs("kill");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_NE(runs[0].error.find("rank 0 was killed by signal 9"), std::string::npos) << runs[0].error;
  EXPECT_NE(runs[0].error.find("-rank0.log"), std::string::npos) << runs[0].error;  // where to look
  EXPECT_EQ(runs[1].status, RunStatus::completed);
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(60));
}

TEST_F(CliTest, DdpOnTwoGlooRanksMatchesOneProcessWithTheGlobalBatch) {
  std::string file = dir.write("ddp.yaml", R"(
name: ddp
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 256, val_size: 64, test_size: 64, num_classes: 4, noise: 0.3}
train: {epochs: 2, batch_size: 8, optimizer: {name: adam, lr: 3.0e-3}, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: one-process-batch-16
      set: {train.batch_size: 16}
    - name: ddp-2-ranks-batch-8
      set: {runtime.strategy: ddp, runtime.devices: 2}
)");
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  auto runs = store.runs("ddp");
  ASSERT_EQ(runs.size(), 2u);
  auto single = store.final_metrics(runs[0].id), ddp = store.final_metrics(runs[1].id);
  EXPECT_EQ(ddp.at("steps"), single.at("steps"));
  // Same samples per step, gradients averaged over the ranks: the same training, up to float
  // summation order (tolerance 1e-5).
  EXPECT_NEAR(ddp.at("test_loss"), single.at("test_loss"), 1e-5);
  auto single_epochs = store.epoch_metrics(runs[0].id), ddp_epochs = store.epoch_metrics(runs[1].id);
  EXPECT_NEAR(ddp_epochs[1].values.at("train_loss"), single_epochs[1].values.at("train_loss"), 1e-5);
  EXPECT_TRUE(fs::exists(runs[1].environment.log_path.substr(0, runs[1].environment.log_path.size() - 4) + "-rank1.log"));
}

TEST_F(CliTest, ValidateListAndHelp) {
  Result validate = trainyard("validate " + source("experiments/quickstart.yaml"));
  EXPECT_EQ(validate.exit_code, 0) << validate.output;
  EXPECT_NE(validate.output.find("ok — experiment 'quickstart', 3 runs"), std::string::npos);

  Result list = trainyard("list");
  EXPECT_EQ(list.exit_code, 0);
  for (const char* name : {"vit", "cifar10", "synthetic-images", "adamw", "cosine", "bf16-mixed", "single"})
    EXPECT_NE(list.output.find(name), std::string::npos) << name;
  EXPECT_NE(list.output.find("reshard_after_forward"), std::string::npos);  // fsdp's options

  EXPECT_EQ(trainyard("list modle").exit_code, 2);
  EXPECT_NE(trainyard("rnu").output.find("did you mean 'run'"), std::string::npos);
  EXPECT_EQ(trainyard("run --bogus").exit_code, 2);
  EXPECT_EQ(trainyard("--help").exit_code, 0);
  EXPECT_EQ(trainyard("report --db " + db() + " -o x.html").exit_code, 2);  // no database yet
}

}  // namespace
}  // namespace trainyard
