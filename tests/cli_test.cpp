// End to end: the trainyard executable on real experiment files, into temporary databases.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>

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

// Starts `trainyard run FILE --db DB EXTRA...` in the background, its output discarded.
pid_t start_run(const std::string& file, const std::string& db, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {TRAINYARD_EXE, "run", file, "--db", db};
  args.insert(args.end(), extra.begin(), extra.end());
  pid_t child = fork();
  if (child == 0) {
    freopen("/dev/null", "w", stderr);
    freopen("/dev/null", "w", stdout);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(TRAINYARD_EXE, argv.data());
    _exit(127);
  }
  return child;
}

int exit_code_of(pid_t child) {
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
  if (runs[1].status == RunStatus::skipped) {
    EXPECT_EQ(runs[1].error, "needs a CUDA device; this machine has none");
  }
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

// The rank number a worker process was given (RANK in its environment), or -1.
int rank_of(pid_t pid) {
  std::string environ = read_file(fmt::format("/proc/{}/environ", pid));
  for (size_t start = 0; start < environ.size();) {
    size_t end = environ.find('\0', start);
    std::string entry = environ.substr(start, end - start);
    if (entry.rfind("RANK=", 0) == 0) return std::stoi(entry.substr(5));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return -1;
}

// The worker processes of a run `controller` started, once there are `count` of them (60 s at most).
std::vector<pid_t> wait_for_workers(pid_t controller, size_t count) {
  std::vector<pid_t> workers;
  for (int i = 0; i < 600 && workers.size() < count; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    workers = children_of(controller);
  }
  return workers;
}

// Rank 1 of a 2-rank run `controller` started, a few seconds into training (past the rendezvous);
// -1 when the workers did not appear.
pid_t rank_one_once_training(pid_t controller) {
  std::vector<pid_t> workers = wait_for_workers(controller, 2);
  if (workers.size() != 2) return -1;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  return rank_of(workers[0]) == 1 ? workers[0] : workers[1];
}

TEST_F(CliTest, AKilledRankFailsItsRunAndTheBatchGoesOn) {
  std::string file = dir.write("kill.yaml", R"(
name: kill
model: {name: vit, image_size: 32, patch_size: 8, depth: 2, width: 64, heads: 4, mlp_dim: 128, num_classes: 10}
dataset: {name: synthetic-images, train_size: 100000, val_size: 32, test_size: 32}
train: {epochs: 5, batch_size: 16}
runtime: {accelerator: cpu, threads: 1, strategy: fsdp, devices: 2}
sweep:
  variants:
    - name: victim
    - name: next
      set: {dataset.train_size: 64}
)");
  pid_t controller = start_run(file, db());
  KillOnExit guard{controller};
  const pid_t rank1 = rank_one_once_training(controller);
  ASSERT_GT(rank1, 0);
  auto killed_at = std::chrono::steady_clock::now();
  kill(rank1, SIGKILL);
  EXPECT_EQ(exit_code_of(controller), 1);  // a run failed
  Store store(db());
  auto runs = store.runs("kill");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_NE(runs[0].error.find("rank 1 was killed by signal 9"), std::string::npos) << runs[0].error;
  EXPECT_NE(runs[0].error.find("-rank1.log"), std::string::npos) << runs[0].error;  // where to look
  EXPECT_EQ(runs[1].status, RunStatus::completed);
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(30));
}

// Every strategy on 2 and 4 Gloo ranks trains as one process does with the same global batch of 16:
// the same samples in every step, gradients averaged over the ranks. Equal up to float summation
// order: test loss after 32 steps within 1e-4. Sharded strategies hold 1/N of the training state.
TEST_F(CliTest, EveryStrategyOnTwoAndFourRanksMatchesOneProcessWithTheGlobalBatch) {
  std::string yaml = R"(
name: strategies
model: {name: vit, image_size: 16, patch_size: 4, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 256, val_size: 64, test_size: 64, num_classes: 4, noise: 0.3}
train: {epochs: 2, batch_size: 16, optimizer: {name: adam, lr: 3.0e-3}, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: single
)";
  const std::vector<std::string> strategies = {"ddp", "zero2", "fsdp"};
  for (const auto& strategy : strategies)
    for (int ranks : {2, 4})
      yaml += fmt::format("    - {{name: {0}-{1}, set: {{runtime.strategy: {0}, runtime.devices: {1}, train.batch_size: {2}}}}}\n",
                          strategy, ranks, 16 / ranks);
  yaml += "    - {name: fsdp-2-keep-gathered, set: {runtime.strategy: {name: fsdp, reshard_after_forward: false}, "
          "runtime.devices: 2, train.batch_size: 8}}\n";
  // Buckets of 10 KB: several per model, so the in-order launching of buckets is exercised.
  for (const char* strategy : {"ddp", "zero2"})
    yaml += fmt::format("    - {{name: {0}-4-small-buckets, set: {{runtime.strategy: {{name: {0}, bucket_mb: 0.01}}, "
                        "runtime.devices: 4, train.batch_size: 4}}}}\n", strategy);
  Result run = trainyard("run " + dir.write("strategies.yaml", yaml) + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  auto runs = store.runs("strategies");
  ASSERT_EQ(runs.size(), 10u);
  auto single = store.final_metrics(runs[0].id);
  auto single_epochs = store.epoch_metrics(runs[0].id);
  for (size_t i = 1; i < runs.size(); ++i) {
    SCOPED_TRACE(runs[i].variant);
    auto m = store.final_metrics(runs[i].id);
    EXPECT_EQ(m.at("steps"), single.at("steps"));
    EXPECT_NEAR(m.at("test_loss"), single.at("test_loss"), 1e-4);
    EXPECT_NEAR(store.epoch_metrics(runs[i].id)[1].values.at("train_loss"), single_epochs[1].values.at("train_loss"), 1e-4);
  }
  // Per-rank training state, from the engine's accounting: ddp keeps everything on every rank; zero2
  // 1/N of the gradients and optimizer state; fsdp 1/N of all three (up to padding to N).
  auto per_rank = [&](const std::string& variant, const char* key) {
    for (const auto& r : runs)
      if (r.variant == variant) return store.final_metrics(r.id).at(key);
    return -1.0;
  };
  for (const char* key : {"param_bytes_per_rank", "grad_bytes_per_rank", "optimizer_state_bytes_per_rank"}) {
    SCOPED_TRACE(key);
    for (int ranks : {2, 4}) {
      const double ddp = per_rank(fmt::format("ddp-{}", ranks), key);
      EXPECT_EQ(ddp, single.at(key));
      // Within 2% of 1/N: shards are padded to a multiple of N, and Adam keeps one step count per
      // tensor it updates (one per parameter under ddp, one per shard under fsdp and zero2).
      const double fsdp = per_rank(fmt::format("fsdp-{}", ranks), key);
      EXPECT_NEAR(fsdp, ddp / ranks, 0.02 * ddp / ranks);
      const double zero2 = per_rank(fmt::format("zero2-{}", ranks), key);
      if (std::string(key) == "param_bytes_per_rank") EXPECT_EQ(zero2, ddp);
      else EXPECT_NEAR(zero2, ddp / ranks, 0.02 * ddp / ranks);
    }
  }
  EXPECT_TRUE(fs::exists(runs[1].environment.log_path.substr(0, runs[1].environment.log_path.size() - 4) + "-rank1.log"));
}

// Each strategy composes with the mixed precisions, gradient accumulation and clipping, and saves
// the whole model; a 2-rank fsdp run trains as one process with the same global batch.
TEST_F(CliTest, StrategiesComposeWithPrecisionsAccumulationAndClipping) {
  std::string yaml = R"(
name: compose
model: {name: distilbert, layers: 2, dim: 32, heads: 2, hidden_dim: 64, max_positions: 64, dropout: 0, attention_dropout: 0, classifier_dropout: 0}
dataset: {name: synthetic-text, train_size: 96, val_size: 32, test_size: 32, max_length: 32}
train: {epochs: 1, batch_size: 4, grad_accum: 2, clip_grad_norm: 0.5, optimizer: {name: adamw, lr: 3.0e-3}, log_every: 1000, save_weights: true}
runtime: {accelerator: cpu, threads: 1, devices: 2}
sweep:
  variants:
    - {name: single-8, set: {train.batch_size: 8, runtime.devices: 1}}
    - {name: fsdp, set: {runtime.strategy: fsdp}}
)";
  for (const char* strategy : {"ddp", "zero2", "fsdp"})
    for (const char* precision : {"bf16-mixed", "16-mixed", "bf16-true"})
      yaml += fmt::format("    - {{name: {0}-{1}, set: {{runtime.strategy: {0}, runtime.precision: {1}}}}}\n", strategy, precision);
  yaml += "    - {name: zero2-bf16-reduce, set: {runtime.strategy: {name: zero2, reduce_dtype: bfloat16}}}\n";
  Result run = trainyard("run " + dir.write("compose.yaml", yaml) + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  auto runs = store.runs("compose");
  ASSERT_EQ(runs.size(), 12u);
  EXPECT_EQ(store.attributes(runs[1].id).at("reduce_dtype"), "Float");  // fp32 averages by default
  EXPECT_EQ(store.attributes(runs.back().id).at("reduce_dtype"), "BFloat16");
  const double single_loss = store.final_metrics(runs[0].id).at("test_loss");
  EXPECT_NEAR(store.final_metrics(runs[1].id).at("test_loss"), single_loss, 1e-4);
  for (const auto& r : runs) {
    SCOPED_TRACE(r.variant);
    EXPECT_EQ(r.status, RunStatus::completed);
    auto m = store.final_metrics(r.id);
    EXPECT_TRUE(std::isfinite(m.at("test_loss")));
    EXPECT_NEAR(m.at("test_loss"), single_loss, 0.1);  // lower precisions: close, not equal
    EXPECT_TRUE(fs::exists(fs::path(r.environment.log_path).replace_extension(".safetensors")));
  }
}

// Training state is saved whole, per parameter: a run resumes exactly where it stopped, and a 4-rank
// fsdp state resumes (or is evaluated) under another strategy and world size.
TEST_F(CliTest, TrainingStateResumesUnderAnyStrategyAndWorldSize) {
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
    std::string variant = dir.write(name + ".yaml", "extends: resume.yaml\nname: " + name + "\nsweep: {variants: [{name: " +
                                                        name + ", set: {train.resume_from: '" + state + "', " + sets + "}}]}\n");
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
  EXPECT_NEAR(resume(fsdp_state, "fsdp-on-ddp", "train.epochs: 3, runtime.strategy: ddp, runtime.devices: 2, train.batch_size: 8"),
              test_loss(runs[2]), 5e-4);
  // Nothing left to train: the state's model evaluated on 1 and 2 ranks scores as the 4-rank run did.
  EXPECT_NEAR(resume(fsdp_state, "fsdp-evaluated", "train.epochs: 2"), test_loss(runs[3]), 1e-6);
  EXPECT_NEAR(resume(fsdp_state, "fsdp-evaluated-2", "train.epochs: 2, runtime.strategy: fsdp, runtime.devices: 2, train.batch_size: 8"),
              test_loss(runs[3]), 1e-6);

  // A folder that is not a training state fails the run with the reason, and nothing else.
  Result bad = trainyard("run " + file + " --db " + db() + " --set train.resume_from=" + dir.path().string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("has no trainer_state.json"), std::string::npos) << bad.output;
}

// A run resumed from its best epoch tests that epoch's weights when later epochs do worse, as the
// uninterrupted run does (checkpoint: best).
TEST_F(CliTest, AResumedRunKeepsTheBestEpochsWeights) {
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
  ASSERT_EQ(straight.at("best_epoch"), 2);  // epoch 3 validates worse: the test uses epoch 2's weights
  const std::string state = store.attributes(runs[1].id).at("state_path");
  Result resumed = trainyard("run " + file + " --db " + db() + " --set train.resume_from=" + state);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto again = store.runs("best");
  auto metrics = store.final_metrics(again[2].id);
  EXPECT_EQ(metrics.at("best_epoch"), 2);
  EXPECT_NEAR(metrics.at("test_loss"), straight.at("test_loss"), 1e-6);
}

// A rank that stops answering (SIGSTOP: alive, silent) leaves the others waiting in a collective;
// after runtime.timeout_s they give up, the run fails naming the rank and the timeout, the stopped
// rank is killed, and the batch goes on.
TEST_F(CliTest, AHangingCollectiveFailsTheRunAfterTheTimeout) {
  std::string file = dir.write("hang.yaml", R"(
name: hang
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 100000, val_size: 32, test_size: 32, num_classes: 4}
train: {epochs: 5, batch_size: 8}
runtime: {accelerator: cpu, threads: 1, strategy: ddp, devices: 2, timeout_s: 5}
sweep:
  variants:
    - name: stalled
    - name: next
      set: {dataset.train_size: 64}
)");
  pid_t controller = start_run(file, db());
  KillOnExit guard{controller};
  const pid_t rank1 = rank_one_once_training(controller);
  ASSERT_GT(rank1, 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  kill(rank1, SIGSTOP);
  EXPECT_EQ(exit_code_of(controller), 1);  // a run failed
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, std::chrono::seconds(60));
  Store store(db());
  auto runs = store.runs("hang");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_NE(runs[0].error.find("rank 0 exited with code"), std::string::npos) << runs[0].error;
  EXPECT_NE(runs[0].error.find("imed out"), std::string::npos) << runs[0].error;  // Gloo: "Timed out ..."
  EXPECT_EQ(runs[1].status, RunStatus::completed) << runs[1].error;
  EXPECT_NE(kill(rank1, 0), 0);  // no orphan
}

// Two controllers of two ranks each, on loopback as two nodes, train as four ranks on one node do.
TEST_F(CliTest, TwoNodesOfTwoRanksTrainAsFourRanksOnOneNode) {
  std::string file = dir.write("nodes.yaml", R"(
name: nodes
model: {name: vit, image_size: 16, patch_size: 4, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 128, val_size: 32, test_size: 32, num_classes: 4, noise: 0.3}
train: {epochs: 1, batch_size: 4, optimizer: {name: adam, lr: 3.0e-3}}
runtime: {accelerator: cpu, threads: 1, strategy: ddp, devices: 2}
sweep:
  variants:
    - name: default
    - name: one-device  # node 0 alone trains it; node 1 skips it
      set: {runtime.strategy: single, runtime.devices: 1, train.batch_size: 16}
)");
  const std::string one_node_db = (dir.path() / "one" / "t.db").string();
  Result one_node = trainyard("run " + file + " --db " + one_node_db + " --set runtime.devices=4 --set runtime.strategy=ddp");
  ASSERT_EQ(one_node.exit_code, 0) << one_node.output;

  const std::string port = std::to_string(20000 + getpid() % 20000);
  auto node = [&](int rank, const std::string& db_path) {
    return start_run(file, db_path, {"--nnodes", "2", "--node-rank", std::to_string(rank), "--master-addr", "127.0.0.1",
                                     "--master-port", port});
  };
  pid_t node1 = node(1, (dir.path() / "node1" / "t.db").string());
  KillOnExit guard1{node1};
  pid_t node0 = node(0, db());
  KillOnExit guard0{node0};
  EXPECT_EQ(exit_code_of(node0), 0);
  EXPECT_EQ(exit_code_of(node1), 0);
  Store store(db());
  auto runs = store.runs("nodes");
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_EQ(runs[0].status, RunStatus::completed) << runs[0].error;
  EXPECT_EQ(runs[1].status, RunStatus::completed) << runs[1].error;
  Store reference(one_node_db);
  const double four_ranks = reference.final_metrics(reference.runs("nodes")[0].id).at("test_loss");
  EXPECT_NEAR(store.final_metrics(runs[0].id).at("test_loss"), four_ranks, 1e-5);
  EXPECT_FALSE(fs::exists(dir.path() / "node1" / "t.db"));  // only node 0 records
  EXPECT_TRUE(fs::exists(dir.path() / "node1" / "logs" / "nodes" / "run-1-default-node1-rank3.log"));

  // Flags that cannot describe a node are refused before anything runs.
  EXPECT_EQ(trainyard("run " + file + " --db " + db() + " --nnodes 2 --node-rank 2 --master-port 1234").exit_code, 2);
  EXPECT_EQ(trainyard("run " + file + " --db " + db() + " --nnodes 2 --node-rank 1").exit_code, 2);  // no port
}

// The benchmarks' experiment files run where device time is scarce: a file that no longer validates
// must fail here, not in the one GPU call of a session.
TEST_F(CliTest, BenchmarkExperimentFilesValidate) {
  std::map<std::string, int> runs = {{"gpu/vit_throughput.yaml", 12}, {"gpu/distilbert_throughput.yaml", 12},
                                     {"gpu/sync_check.yaml", 5},       {"gpu/study_vit.yaml", 1},
                                     {"gpu/study_distilbert.yaml", 1}};
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(source("bench"))) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    Result validate = trainyard("validate " + entry.path().string());
    EXPECT_EQ(validate.exit_code, 0) << validate.output;
    const std::string name = std::filesystem::relative(entry.path(), source("bench")).string();
    if (runs.count(name)) {
      const std::string count = fmt::format("{} run{}\n", runs[name], runs[name] == 1 ? "" : "s");
      EXPECT_NE(validate.output.find(count), std::string::npos) << name << ": " << validate.output;
    }
  }
  EXPECT_GE(files, 6);
}

TEST_F(CliTest, ValidateListAndHelp) {
  Result validate = trainyard("validate " + source("experiments/quickstart.yaml"));
  EXPECT_EQ(validate.exit_code, 0) << validate.output;
  EXPECT_NE(validate.output.find("ok — experiment 'quickstart', 3 runs"), std::string::npos);
  Result strategies_example = trainyard("validate " + source("experiments/strategies_cpu.yaml"));
  EXPECT_NE(strategies_example.output.find("ok — experiment 'strategies_cpu', 4 runs"), std::string::npos)
      << strategies_example.output;

  Result list = trainyard("list");
  EXPECT_EQ(list.exit_code, 0);
  for (const char* name : {"vit", "cifar10", "synthetic-images", "adamw", "cosine", "bf16-mixed", "single"})
    EXPECT_NE(list.output.find(name), std::string::npos) << name;
  EXPECT_NE(list.output.find("reshard_after_forward"), std::string::npos);  // fsdp's options

  EXPECT_EQ(trainyard("list modle").exit_code, 2);
  Result strategies = trainyard("list strategies");  // the plural names the kind too
  EXPECT_EQ(strategies.exit_code, 0);
  EXPECT_NE(strategies.output.find("zero2"), std::string::npos);
  EXPECT_NE(trainyard("rnu").output.find("did you mean 'run'"), std::string::npos);
  EXPECT_EQ(trainyard("run --bogus").exit_code, 2);
  EXPECT_EQ(trainyard("--help").exit_code, 0);
  EXPECT_EQ(trainyard("report --db " + db() + " -o x.html").exit_code, 2);  // no database yet
}

}  // namespace
}  // namespace trainyard
