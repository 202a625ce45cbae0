// train.micro_batch_size: auto under a real memory limit: the worker inherits RLIMIT_DATA from the
// test (as from `ulimit -d`), so a batch of 256 fails to allocate in LibTorch's CPU allocator and
// a micro-batch of 32 does not. The run halves its micro-batch until a step fits, and computes
// what a run started at that size by hand computes, bit for bit; a run continued after a kill
// starts at the size it had reached; below one sample it fails out-of-memory, naming the sizes.
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::trainyard;

// The processes this test starts from here on may hold at most `bytes` of data (heap and private
// mappings); the limit is lifted again when the guard goes. RLIMIT_DATA counts what glibc keeps
// of freed blocks too (its mmap threshold rises with each large block freed, and later tensors
// come from a heap that does not shrink): with the threshold fixed at 1 MiB every tensor is a
// mapping of its own, unmapped when freed, so the limit measures live memory, as a cgroup's does.
class DataLimit {
 public:
  explicit DataLimit(rlim_t bytes) {
    getrlimit(RLIMIT_DATA, &before_);
    rlimit limit = before_;
    limit.rlim_cur = bytes;
    EXPECT_EQ(setrlimit(RLIMIT_DATA, &limit), 0);
    setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=1048576", 1);
  }
  ~DataLimit() {
    setrlimit(RLIMIT_DATA, &before_);
    unsetenv("GLIBC_TUNABLES");
  }

 private:
  rlimit before_{};
};

// Measured on this machine's image (2 cores, LibTorch 2.11 CPU), with one thread and no loader
// threads (a failed allocation can only be a tensor's): a worker of the file below needs over
// 750 MB with whole batches of 256, and fits at 128 or less — the same from 600 MB to 1 GB.
constexpr rlim_t kLimit = 750'000'000;

std::string experiment(const std::string& name, const std::string& micro_batch_size,
                       int64_t train_size = 512, const std::string& extra = "",
                       const std::string& runtime_extra = "") {
  return "name: " + name + R"(
model: {name: vit, image_size: 64, patch_size: 4, depth: 2, width: 128, heads: 4, mlp_dim: 256, num_classes: 4, dropout: 0.1}
dataset: {name: synthetic-images, train_size: )" +
         std::to_string(train_size) + R"(, val_size: 64, test_size: 64, num_classes: 4}
train: {epochs: 2, batch_size: 256, eval_batch_size: 32, log_every: 1)" +
         (micro_batch_size.empty() ? "" : ", micro_batch_size: " + micro_batch_size) + extra +
         R"(}
runtime: {accelerator: cpu, threads: 1, data_workers: 0)" +
         runtime_extra + "}\n";
}

// A TorchScript net with BatchNorm (running statistics: buffers every forward moves), the same
// sizes as experiment()'s.
std::string batchnorm_experiment(const std::string& name, const std::string& micro_batch_size,
                                 int64_t train_size = 512, const std::string& runtime_extra = "") {
  return "name: " + name + R"(
model: {name: torchscript, file: )" +
         testing::source("tests/fixtures/torchscript_batchnorm.pt") +
         R"(, image_size: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: )" +
         std::to_string(train_size) + R"(, val_size: 64, test_size: 64, num_classes: 4}
train: {epochs: 2, batch_size: 256, eval_batch_size: 32, log_every: 1, micro_batch_size: )" +
         micro_batch_size + R"(}
runtime: {accelerator: cpu, threads: 1, data_workers: 0)" +
         runtime_extra + "}\n";
}

// Every figure a run trains to — each epoch's, and its test's — of the experiment's only run.
std::map<std::string, double> trained(const std::string& db, const std::string& name) {
  Store store(db);
  const RunRecord run = store.runs(name).at(0);
  std::map<std::string, double> figures;
  for (const auto& epoch : store.epoch_metrics(run.id))
    for (const char* key : {"train_loss", "train_acc", "val_loss", "val_acc"})
      figures[std::to_string(epoch.epoch) + "/" + key] = epoch.values.at(key);
  for (const char* key : {"test_loss", "test_acc", "steps"})
    figures[key] = store.final_metrics(run.id).at(key);
  return figures;
}

class MicroBatchTest : public testing::CliTest {};

TEST_F(MicroBatchTest, AutoFitsUnderARealMemoryLimitAndComputesWhatItsSizeComputes) {
  const std::string whole = dir.write("whole.yaml", experiment("whole", ""));
  const std::string automatic = dir.write("automatic.yaml", experiment("automatic", "auto"));
  {
    DataLimit limit(kLimit);
    // The limit is real: the whole batch does not fit.
    Result failed = trainyard("run " + whole + " --db " + db());
    EXPECT_EQ(failed.exit_code, 1) << failed.output;
    EXPECT_NE(failed.output.find("run failed (out-of-memory)"), std::string::npos) << failed.output;
    Result fits = trainyard("run " + automatic + " --db " + db());
    ASSERT_EQ(fits.exit_code, 0) << fits.output;
    EXPECT_NE(fits.output.find("out of memory at micro-batch 256 (step 1): the same step again "
                               "at micro-batch 128"),
              std::string::npos)
        << fits.output;
  }
  Store store(db());
  EXPECT_EQ(store.runs("whole").at(0).failure, FailureClass::out_of_memory);
  const RunRecord run = store.runs("automatic").at(0);
  const auto figures = store.final_metrics(run.id);
  const int64_t micro = std::lround(figures.at("micro_batch_size"));
  EXPECT_GE(micro, 8);
  EXPECT_LE(micro, 128);
  EXPECT_EQ(figures.at("oom_events"), std::log2(256.0 / static_cast<double>(micro)));
  EXPECT_GT(figures.at("oom_seconds"), 0);
  EXPECT_LT(figures.at("oom_seconds"), figures.at("train_seconds"));
  EXPECT_EQ(figures.at("steps"), 4);  // the steps are the configured ones: 2 epochs of 2

  // What it computed is what a run started at that size computes, bit for bit, without a limit.
  const std::string by_hand =
      dir.write("by_hand.yaml", experiment("by_hand", std::to_string(micro)));
  ASSERT_EQ(trainyard("run " + by_hand + " --db " + db()).exit_code, 0);
  EXPECT_EQ(trained(db(), "automatic"), trained(db(), "by_hand"));

  // The answer says what happened, and so does the report's CSV.
  Result answer = trainyard("report --db " + db() + " --experiment automatic");
  const int64_t halvings = std::lround(figures.at("oom_events"));
  EXPECT_NE(answer.output.find(fmt::format("batch 256: fit at micro-batch {} after {} halving{}",
                                           micro, halvings, halvings == 1 ? "" : "s")),
            std::string::npos)
      << answer.output;
}

// A step abandoned for running out of memory puts the model's buffers back: BatchNorm's running
// statistics, which the abandoned forwards moved, are where the step began.
TEST_F(MicroBatchTest, AnAbandonedStepLeavesBatchNormStatisticsWhereTheyWere) {
  auto file = [&](const std::string& name, const std::string& micro) {
    return dir.write(name + ".yaml", batchnorm_experiment(name, micro));
  };
  {
    DataLimit limit(kLimit);
    Result fits = trainyard("run " + file("automatic", "auto") + " --db " + db());
    ASSERT_EQ(fits.exit_code, 0) << fits.output;
    EXPECT_NE(fits.output.find("out of memory at micro-batch 256"), std::string::npos)
        << fits.output;
  }
  Store store(db());
  const int64_t micro =
      std::lround(store.final_metrics(store.runs("automatic").at(0).id).at("micro_batch_size"));
  ASSERT_LT(micro, 256);
  ASSERT_EQ(trainyard("run " + file("by_hand", std::to_string(micro)) + " --db " + db()).exit_code,
            0);
  EXPECT_EQ(trained(db(), "automatic"), trained(db(), "by_hand"));
}

// Killed in epoch 2, the run continues without a limit at the micro-batch it had come down to:
// its figures are those of a run started at that size.
TEST_F(MicroBatchTest, AContinuedRunStartsAtTheSizeItHadReached) {
  const std::string automatic = dir.write(
      "automatic.yaml", experiment("automatic", "auto", 512, ", checkpoint_every_steps: 1"));
  const fs::path logs = fs::path(db()).parent_path() / "logs";
  {
    DataLimit limit(kLimit);
    pid_t controller = testing::start_run(automatic, db());
    testing::KillOnExit guard{controller};
    bool mid_epoch = false;
    for (int i = 0; i < 4800 && !mid_epoch; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      const auto [done, batch] = testing::checkpoint_position(logs);
      mid_epoch = done == 1 && batch > 0;
    }
    ASSERT_TRUE(mid_epoch) << "no mid-epoch checkpoint in epoch 2";
    kill(controller, SIGKILL);
    testing::exit_code_of(controller);
  }
  Result again = trainyard("run " + automatic + " --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("continues from its checkpoint at epoch 2"), std::string::npos)
      << again.output;
  EXPECT_EQ(again.output.find("out of memory at"), std::string::npos) << again.output;
  Store store(db());
  const auto figures = store.final_metrics(store.runs("automatic").at(0).id);
  const int64_t micro = std::lround(figures.at("micro_batch_size"));
  EXPECT_LT(micro, 256);
  EXPECT_GE(figures.at("oom_events"), 1);  // counted before the kill, kept by the checkpoint
  const std::string by_hand =
      dir.write("by_hand.yaml",
                experiment("by_hand", std::to_string(micro), 512, ", checkpoint_every_steps: 1"));
  ASSERT_EQ(trainyard("run " + by_hand + " --db " + db()).exit_code, 0);
  EXPECT_EQ(trained(db(), "automatic"), trained(db(), "by_hand"));
}

// Under ddp and zero2 the ranks agree: only rank 1 is given the limit (prlimit on its process, as
// soon as it exists), yet both ranks halve together, and what they compute is what a 2-rank run
// started at that size by hand computes, bit for bit — with ddp also for a BatchNorm net, whose
// buffers ddp broadcasts before every micro-batch's forward and an abandoned step puts back.
TEST_F(MicroBatchTest, RanksAgreeOnTheSizeWhenOnlyOneRunsOutOfMemory) {
  const fs::path logs = fs::path(db()).parent_path() / "logs";
  struct Case {
    std::string name, strategy;
    bool batchnorm;
  };
  for (const Case& c : {Case{"ddp", "ddp", false}, Case{"zero2", "zero2", false},
                        Case{"ddp_batchnorm", "ddp", true}}) {
    SCOPED_TRACE(c.name);
    const std::string& strategy = c.name;  // the experiments' names
    const std::string distributed = ", strategy: " + c.strategy + ", devices: 2";
    auto yaml = [&](const std::string& name, const std::string& micro) {
      std::string file = c.batchnorm ? batchnorm_experiment(name, micro, 512, distributed)
                                     : experiment(name, micro, 512, "", distributed);
      // One epoch: its one step a rank is where the halving happens; a second adds only time.
      const std::size_t epochs = file.find("epochs: 2");
      file.replace(epochs, 9, "epochs: 1");
      return file;
    };
    const std::string automatic =
        dir.write(strategy + "_auto.yaml", yaml(strategy + "_auto", "auto"));
    {
      setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=1048576", 1);
      pid_t controller = testing::start_run(automatic, db());
      testing::KillOnExit guard{controller};
      std::vector<pid_t> workers = testing::wait_for_workers(controller, 2);
      unsetenv("GLIBC_TUNABLES");
      ASSERT_EQ(workers.size(), 2u);
      // A forked worker shows its RANK once it has exec'd (before, /proc shows the controller's
      // environment); it is then still loading LibTorch, well before its first step.
      pid_t rank_one = -1;
      for (int i = 0; i < 2000 && rank_one < 0; ++i) {
        for (pid_t worker : workers)
          if (testing::rank_of(worker) == 1) rank_one = worker;
        if (rank_one < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ASSERT_GT(rank_one, 0) << "rank 1's worker did not show its RANK";
      const rlimit limit{kLimit, RLIM_INFINITY};
      ASSERT_EQ(prlimit(rank_one, RLIMIT_DATA, &limit, nullptr), 0);
      ASSERT_EQ(testing::exit_code_of(controller), 0);
      guard.pid = -1;
    }
    Store store(db());
    const auto figures = store.final_metrics(store.runs(strategy + "_auto").at(0).id);
    const int64_t micro = std::lround(figures.at("micro_batch_size"));
    EXPECT_LE(micro, 128);
    EXPECT_EQ(figures.at("oom_events"), std::log2(256.0 / static_cast<double>(micro)));
    // Rank 1 ran out; rank 0, which did not, heard it from rank 1 and halved with it.
    std::string logged;
    for (const auto& entry : fs::recursive_directory_iterator(logs))
      if (entry.is_regular_file() &&
          entry.path().string().find(strategy + "_auto") != std::string::npos)
        logged += testing::read_file(entry.path());
    EXPECT_NE(logged.find("(rank 1: "), std::string::npos) << logged;
    // The limit came before the first step: that step was the first split.
    EXPECT_NE(logged.find("out of memory at micro-batch 256 (step 1)"), std::string::npos)
        << logged;
    EXPECT_NE(logged.find("(rank 1 ran out of memory)"), std::string::npos) << logged;

    const std::string by_hand =
        dir.write(strategy + "_by_hand.yaml", yaml(strategy + "_by_hand", std::to_string(micro)));
    ASSERT_EQ(trainyard("run " + by_hand + " --db " + db()).exit_code, 0);
    EXPECT_EQ(trained(db(), strategy + "_auto"), trained(db(), strategy + "_by_hand"));
  }
}

// One sample that does not fit: the run fails out-of-memory and names the sizes it tried.
TEST_F(MicroBatchTest, BelowOneSampleTheRunFailsOutOfMemoryNamingTheSizesTried) {
  // 16,384 patches of width 64 with an MLP of 4096: one sample's activations are over 1 GB.
  const std::string file = dir.write("floor.yaml", R"(
name: floor
model: {name: vit, image_size: 512, patch_size: 4, depth: 1, width: 64, heads: 1, mlp_dim: 4096, num_classes: 4}
dataset: {name: synthetic-images, train_size: 8, val_size: 4, test_size: 4, num_classes: 4}
train: {epochs: 1, batch_size: 4, micro_batch_size: auto}
runtime: {accelerator: cpu, threads: 1, data_workers: 0}
)");
  DataLimit limit(kLimit);
  Result run = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("run failed (out-of-memory): out of memory at every micro-batch size "
                            "tried (4, 2, 1 samples), down to one sample"),
            std::string::npos)
      << run.output;
}

// The forecast before training: the state from the model and optimizer, the activations from two
// real small steps; a CPU run's measured peak is within 25% of it. With --device-memory it says
// what would fit.
TEST_F(MicroBatchTest, TheDryRunForecastsAPeakTheRunReaches) {
  const std::string file = dir.write("forecast.yaml", experiment("forecast", ""));
  Result dry = trainyard("run " + file + " --db " + db() + " --dry-run --device-memory 800MiB");
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("parameters 1.2 MiB · gradients 1.2 MiB · optimizer state 2.3 MiB"),
            std::string::npos)
      << dry.output;
  const std::regex peak(R"re(a step at micro-batch 256: ([0-9.]+) (MiB|GiB) resident)re");
  std::smatch found;
  ASSERT_TRUE(std::regex_search(dry.output, found, peak)) << dry.output;
  const double forecast = std::stod(found[1].str()) * (found[2].str() == "GiB" ? 1 << 30 : 1 << 20);
  EXPECT_NE(dry.output.find("does not fit in 800.0 MiB: it would at micro-batch "),
            std::string::npos)
      << dry.output;
  EXPECT_FALSE(fs::exists(db()));  // a dry run writes nothing
  Result roomy = trainyard("run " + file + " --db " + db() + " --dry-run --device-memory 64GiB");
  EXPECT_NE(roomy.output.find("fits in 64.0 GiB"), std::string::npos) << roomy.output;
  Result validated = trainyard("validate " + file + " --memory --device-memory 800MiB");
  EXPECT_EQ(validated.exit_code, 0) << validated.output;
  EXPECT_NE(validated.output.find("does not fit in 800.0 MiB: it would at micro-batch "),
            std::string::npos)
      << validated.output;
  Result bad = trainyard("run " + file + " --dry-run --device-memory lots");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--device-memory 'lots' is not a size"), std::string::npos);

  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  Store store(db());
  const double measured = store.final_metrics(store.runs("forecast").at(0).id).at("peak_rss_bytes");
  EXPECT_NEAR(forecast / measured, 1.0, 0.25)
      << forecast << " forecast, " << measured << " measured";
}

// A study's trial that runs out of memory (a real allocation failure under the data limit: the
// batch of 256 does not fit, as above) is recorded failed with its class, counts as the worst at
// its rung, and the study goes on to its best settings.
TEST_F(MicroBatchTest, AStudysTrialOutOfMemoryIsTheWorstAndTheStudyGoesOn) {
  const std::string file = dir.write("searched.yaml", experiment("searched", "", 256) + R"(sweep:
  search:
    method: random
    trials: 4
    seed: 2
    space:
      train.batch_size: {choice: [16, 256]}
    metric: val_loss
    schedule: {name: successive-halving, grace_epochs: 1, reduction: 3}
    confirm_repeats: 0
)");
  Result run;
  {
    DataLimit limit(kLimit);
    run = trainyard("run " + file + " --db " + db());
  }
  Store store(db());
  const auto studies = store.study_progress();
  ASSERT_EQ(studies.size(), 1u) << run.output;
  const StudyKey key = studies[0].key;
  const auto trials = store.study_trials(key);
  ASSERT_EQ(trials.size(), 4u) << run.output;
  int failed = 0;
  for (const StudyTrialRow& trial : trials) {
    const RunRecord record = *store.run(trial.run_id);
    const bool whole_batch = trial.settings.find("batch_size=256") != std::string::npos;
    SCOPED_TRACE(trial.settings);
    if (!whole_batch) {
      EXPECT_TRUE(trial.figure) << record.error;
      continue;
    }
    ++failed;
    EXPECT_EQ(record.status, RunStatus::failed);
    EXPECT_EQ(record.failure, FailureClass::out_of_memory) << record.error;
    EXPECT_FALSE(trial.figure);
  }
  ASSERT_GE(failed, 1) << "the seed proposes no batch of 256: choose another";
  ASSERT_LE(failed, 3) << "the seed proposes no batch of 16: choose another";
  // The rung's one promotion and the best are trials that trained.
  const auto decisions = store.study_decisions(key);
  ASSERT_EQ(decisions.size(), 1u);
  const int64_t promoted = nlohmann::json::parse(decisions[0].promoted).at(0).get<int64_t>();
  EXPECT_TRUE(trials.at(promoted).figure) << decisions[0].evidence;
  ASSERT_TRUE(store.study_outcome(key)) << run.output;
  EXPECT_EQ(store.study_outcome(key)->best_trial, promoted);
  EXPECT_TRUE(store.study_outcome(key)->figure);
}

}  // namespace
}  // namespace trainyard
