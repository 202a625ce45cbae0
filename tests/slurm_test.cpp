// Sweeps on a real Slurm: each test starts its own one-node cluster (Debian's slurm-wlm, munge;
// tests/slurm/cluster.sh, accounting off), submits with `trainyard submit --slurm`, and reads the
// database on "the login node" after `trainyard collect`. CTest label "slurm".
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::shell;
using testing::trainyard;

class SlurmTest : public testing::CliTest {
 protected:
  virtual int cluster_cpus() const { return 2; }
  void SetUp() override {
    cluster = dir.path() / "cluster";
    const Result started = shell("bash " + testing::source("tests/slurm/cluster.sh") + " start " +
                                 cluster.string() + " " + std::to_string(cluster_cpus()));
    ASSERT_EQ(started.exit_code, 0) << started.output;
    setenv("SLURM_CONF", (cluster / "slurm.conf").c_str(), 1);
  }
  void TearDown() override {
    shell("scancel --me 2>/dev/null");
    wait_for([] { return shell("squeue --me -h").output.empty(); }, 30);
    shell("bash " + testing::source("tests/slurm/cluster.sh") + " stop " + cluster.string());
    shell("pkill -9 -f " + dir.path().string() + " 2>/dev/null");
    unsetenv("SLURM_CONF");
  }

  // A small experiment: `train_size` samples, `train` and `runtime` sections added to, `extra` at
  // the end of the file.
  std::string experiment(const std::string& name, const std::string& extra = "",
                         int train_size = 64, const std::string& train = "",
                         const std::string& runtime = "") {
    return dir.write(name + ".yaml", "name: " + name + R"(
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4, dropout: 0.1}
dataset: {name: synthetic-images, train_size: )" +
                                         std::to_string(train_size) +
                                         R"(, val_size: 32, test_size: 32, num_classes: 4}
train: {epochs: 2, batch_size: 16, log_every: 1000)" +
                                         train + "}\nruntime: {accelerator: cpu, threads: 1" +
                                         runtime + "}\n" + extra);
  }
  // Checkpoints every 10 steps of 16000 samples: a run of several seconds to interrupt.
  std::string long_experiment(const std::string& name, const std::string& extra = "") {
    return experiment(name, extra, 16000, ", checkpoint_every_steps: 10");
  }

  static bool wait_for(const std::function<bool()>& done, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return done();
  }

  // The runs as the database holds them once collected.
  std::vector<RunRecord> collected_runs() {
    const Result collect = trainyard("collect --db " + db());
    EXPECT_EQ(collect.exit_code, 0) << collect.output;
    return Store(db()).runs();
  }
  // Until the database's one run has completed, `seconds` at most.
  bool wait_for_the_one_run_completed(int seconds) {
    return wait_for(
        [&] {
          const auto runs = collected_runs();
          return runs.size() == 1 && runs[0].status == RunStatus::completed;
        },
        seconds);
  }
  // Whether Slurm lists none of this user's jobs but pending ones (the report job waits).
  static bool squeue_lists_none() {
    return shell("squeue --me -h -t RUNNING,COMPLETING").output.empty();
  }
  bool all_ended() {
    const auto runs = collected_runs();
    return !runs.empty() && std::all_of(runs.begin(), runs.end(), [](const RunRecord& run) {
      return run.status != RunStatus::queued && run.status != RunStatus::running;
    });
  }
  fs::path submission(int n) const {
    return dir.path() / "runs" / "slurm" / ("submission-" + std::to_string(n));
  }
  // Until the run has checkpointed inside an epoch (the first one, when `first_epoch`), 60 s at
  // most.
  bool wait_for_checkpoint_inside_an_epoch(bool first_epoch) {
    return wait_for(
        [&] {
          auto [epochs, batch] = testing::checkpoint_position(dir.path() / "runs" / "logs");
          return (first_epoch ? epochs == 0 : epochs >= 0) && batch > 0;
        },
        60);
  }
  // The Slurm job of submission n's first study (studies.json).
  std::string study_job_of(int n) const {
    return nlohmann::json::parse(testing::read_file(submission(n) / "studies.json"))
        .at(0)
        .at("job_id")
        .get<std::string>();
  }
  // `file` trained undisturbed by `trainyard run` into reference/t.db (what the Slurm study must
  // equal), then submitted; the reference database's path.
  std::string reference_then_submitted(const std::string& file, Result& submitted) {
    const std::string reference_db = (dir.path() / "reference" / "t.db").string();
    const Result reference = trainyard("run " + file + " --db " + reference_db);
    EXPECT_EQ(reference.exit_code, 0) << reference.output;
    submitted = trainyard("submit " + file + " --slurm --db " + db());
    EXPECT_EQ(submitted.exit_code, 0) << submitted.output;
    return reference_db;
  }
  // The Slurm job of the database's first run ("12_0").
  std::string job_of_first_run() { return Store(db()).slurm_runs().front().job_id; }
  // `file` trained undisturbed by `trainyard run` into `reference_db` (what the Slurm run must
  // equal), then submitted; `job` is its run's job once that has checkpointed in the first epoch.
  void submit_after_a_reference_run(const std::string& file, const std::string& reference_db,
                                    std::string& job) {
    const Result reference = trainyard("run " + file + " --db " + reference_db);
    ASSERT_EQ(reference.exit_code, 0) << reference.output;
    const Result submitted = trainyard("submit " + file + " --slurm --db " + db());
    ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
    ASSERT_TRUE(wait_for_checkpoint_inside_an_epoch(/*first_epoch=*/true));
    job = job_of_first_run();
  }

  fs::path cluster;
};

// Four runs, at most two at once: all complete into the database, the report job writes the
// report after them, and submitting again submits nothing.
TEST_F(SlurmTest, SweepOfFourRunsThrottledToTwoCompletesIntoTheDatabaseAndTheReport) {
  const std::string file = experiment("sweep", "sweep: {grid: {train.seed: [1, 2, 3, 4]}}\n");
  const Result dry =
      trainyard("submit " + file + " --slurm --max-parallel 2 --dry-run --db " + db());
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("#SBATCH --array=0-3%2"), std::string::npos) << dry.output;
  EXPECT_FALSE(fs::exists(db()));  // a dry run creates nothing

  const Result submitted = trainyard("submit " + file + " --slurm --max-parallel 2 --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  EXPECT_NE(submitted.output.find("4 runs, at most 2 at once"), std::string::npos)
      << submitted.output;
  EXPECT_NE(testing::read_file(submission(1) / "array-0.sbatch").find("#SBATCH --array=0-3%2"),
            std::string::npos);
  ASSERT_TRUE(wait_for([&] { return all_ended(); }, 180))
      << trainyard("status --db " + db()).output;
  for (const RunRecord& run : Store(db()).runs()) {
    EXPECT_EQ(run.status, RunStatus::completed) << run.variant << ": " << run.error;
    EXPECT_FALSE(Store(db()).final_metrics(run.id).empty());
    EXPECT_EQ(Store(db()).epoch_metrics(run.id).size(), 2u);
  }
  // The report job, after the arrays, from its copy of the snapshot.
  ASSERT_TRUE(wait_for([&] { return fs::exists(submission(1) / "report.html"); }, 60))
      << shell("cat " + submission(1).string() + "/slurm-report-*.out").output;
  const std::string report = testing::read_file(submission(1) / "report.html");
  for (const char* seed : {"seed=1", "seed=2", "seed=3", "seed=4"})
    EXPECT_NE(report.find(seed), std::string::npos) << seed;
  // Collecting again changes nothing; submitting again submits nothing.
  EXPECT_EQ(collected_runs().size(), 4u);
  const Result again = trainyard("submit " + file + " --slurm --max-parallel 2 --db " + db());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to submit: 4 already completed"), std::string::npos)
      << again.output;
  EXPECT_EQ(Store(db()).runs().size(), 4u);
  const Result status = trainyard("status --db " + db());
  EXPECT_NE(status.output.find("4 completed"), std::string::npos) << status.output;
}

// Slurm's warning before the time limit (here sent by hand, as --signal would): the run
// checkpoints, the task requeues itself, and the run continues from its checkpoint to the same
// figures as an uninterrupted run, bit for bit.
TEST_F(SlurmTest, RequeuedRunResumesFromItsCheckpointAndEndsEqualToAnUninterruptedOne) {
  const std::string file = long_experiment("requeue");
  const std::string reference_db = (dir.path() / "reference" / "t.db").string();
  std::string job;
  // A checkpoint inside the first epoch, then the warning.
  ASSERT_NO_FATAL_FAILURE(submit_after_a_reference_run(file, reference_db, job));
  ASSERT_EQ(shell("scancel -b -s USR1 " + job).exit_code, 0);
  ASSERT_TRUE(wait_for(
      [&] {
        return shell("squeue --me -h -r -o '%i|%T|%r'").output.find("BeginTime") !=
                   std::string::npos ||
               all_ended();
      },
      30));
  ASSERT_TRUE(wait_for([&] { return all_ended(); }, 120))
      << trainyard("status --db " + db()).output;
  const RunRecord run = Store(db()).runs().front();
  EXPECT_EQ(run.status, RunStatus::completed) << run.error;
  EXPECT_EQ(run.resumes, 1);
  const std::string log = testing::read_file(run.environment.log_path);
  EXPECT_NE(log.find("requeueing Slurm job " + job), std::string::npos) << log;
  EXPECT_NE(log.find("continues as Slurm job " + job + " (restart 1) from its checkpoint"),
            std::string::npos)
      << log;
  EXPECT_EQ(testing::training_figures(db()), testing::training_figures(reference_db));
  EXPECT_FALSE(testing::training_figures(db()).empty());
}

// `scontrol requeue` of a running job (what preemption with PreemptMode=REQUEUE does): SIGTERM,
// the run stops with a checkpoint, Slurm starts the job again, and the run continues to the same
// figures. Submitting meanwhile leaves the requeued job alone.
TEST_F(SlurmTest, JobRequeuedBySlurmContinuesFromItsCheckpoint) {
  const std::string file = long_experiment("preempted");
  const std::string reference_db = (dir.path() / "reference" / "t.db").string();
  std::string job;
  ASSERT_NO_FATAL_FAILURE(submit_after_a_reference_run(file, reference_db, job));
  ASSERT_EQ(shell("scontrol requeue " + job).exit_code, 0);
  const Result again = trainyard("submit " + file + " --slurm --db " + db());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("in Slurm as job " + job), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("nothing to submit"), std::string::npos) << again.output;
  ASSERT_TRUE(wait_for_the_one_run_completed(120)) << trainyard("status --db " + db()).output;
  const RunRecord run = Store(db()).runs().front();
  EXPECT_EQ(run.resumes, 1);
  EXPECT_EQ(testing::training_figures(db()), testing::training_figures(reference_db));
  EXPECT_EQ(Store(db()).submissions().size(), 1u);
}

// A run that fails is recorded failed, with its class and its log's last lines (two ranks: the
// message of one rank alone would be just its own).
TEST_F(SlurmTest, FailingRunIsRecordedFailedWithItsLogTail) {
  std::string broken = testing::failing_data_set(dir);
  broken.insert(broken.size() - 1, ", runtime.devices: 2, runtime.strategy: ddp");
  const std::string file = experiment(
      "fails", "sweep: {variants: [{name: broken, set: " + broken + "}, {name: fine}]}\n");
  const Result submitted = trainyard("submit " + file + " --slurm --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  ASSERT_TRUE(wait_for([&] { return all_ended(); }, 120))
      << trainyard("status --db " + db()).output;
  const auto runs = Store(db()).runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, RunStatus::failed);
  EXPECT_EQ(runs[0].failure, FailureClass::bad_input);
  EXPECT_NE(runs[0].error.find("data_batch_1.bin: 100 bytes"), std::string::npos) << runs[0].error;
  EXPECT_NE(runs[0].error.find("last lines"), std::string::npos) << runs[0].error;
  EXPECT_EQ(runs[1].status, RunStatus::completed) << runs[1].error;
  const Result listed = trainyard("runs --db " + db());
  EXPECT_NE(listed.output.find("bad-input"), std::string::npos) << listed.output;
}

// A 2-rank ddp run inside one array task: the task starts both ranks, as `trainyard run` does.
TEST_F(SlurmTest, TwoRankDdpRunInsideOneArrayTask) {
  const std::string file = experiment("ddp", "", 64, "", ", devices: 2, strategy: ddp");
  const Result submitted = trainyard("submit " + file + " --slurm --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  EXPECT_NE(testing::read_file(submission(1) / "array-0.sbatch").find("--cpus-per-task=2"),
            std::string::npos);
  ASSERT_TRUE(wait_for([&] { return all_ended(); }, 120))
      << trainyard("status --db " + db()).output;
  const RunRecord run = Store(db()).runs().front();
  EXPECT_EQ(run.status, RunStatus::completed) << run.error;
  EXPECT_NE(testing::read_file(run.environment.log_path).find("strategy ddp on 2 ranks"),
            std::string::npos);
  const std::string stem = run.environment.log_path.substr(0, run.environment.log_path.size() - 4);
  EXPECT_TRUE(fs::exists(stem + "-rank1.log"));
}

// A cluster of two nodes, each a slurmd in its own network namespace with its own hostname and
// address (tests/slurm/cluster.sh start DIR 2 2): what runs on one node reaches the other only
// through the network, as across the machines of a cluster.
class TwoNodeSlurmTest : public SlurmTest {
 protected:
  void SetUp() override {
    cluster = dir.path() / "cluster";
    const Result started = shell("bash " + testing::source("tests/slurm/cluster.sh") + " start " +
                                 cluster.string() + " 2 2");
    ASSERT_EQ(started.exit_code, 0) << started.output;
    setenv("SLURM_CONF", (cluster / "slurm.conf").c_str(), 1);
  }
  // training_figures without the configuration's hash: the two-node run and its one-node
  // reference differ in runtime.devices, and so in their hash, not in what they train.
  static std::map<std::string, double> figures_by_variant(const std::string& db) {
    std::map<std::string, double> out;
    for (const auto& [key, value] : testing::training_figures(db)) {
      const size_t variant_end = key.find('/', key.find('/') + 1);
      out[key.substr(0, variant_end) + key.substr(key.find('/', variant_end + 1))] = value;
    }
    return out;
  }
};

// `submit --nodes 2` trains a ddp run of one rank on each node across them, equal to two ranks on
// one node; requeued by Slurm mid-run, it continues from its checkpoint on both nodes and still
// ends equal.
TEST_F(TwoNodeSlurmTest, DdpAcrossTwoNodesEqualsTwoRanksOnOneAndContinuesAfterARequeue) {
  const std::string file =
      experiment("across", "", 8000, ", checkpoint_every_steps: 10", ", strategy: ddp, devices: 1");
  const std::string reference_db = (dir.path() / "reference" / "t.db").string();
  const Result reference =
      trainyard("run " + file + " --set runtime.devices=2 --db " + reference_db);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;

  const Result submitted = trainyard("submit " + file + " --slurm --nodes 2 --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  EXPECT_NE(testing::read_file(submission(1) / "array-0.sbatch").find("--nodes=2"),
            std::string::npos);
  ASSERT_TRUE(wait_for_checkpoint_inside_an_epoch(/*first_epoch=*/true))
      << trainyard("status --db " + db()).output;
  const std::string job = job_of_first_run();
  ASSERT_EQ(shell("scontrol requeue " + job).exit_code, 0);
  ASSERT_TRUE(wait_for_the_one_run_completed(240)) << trainyard("status --db " + db()).output;
  const RunRecord run = Store(db()).runs().front();
  ASSERT_EQ(run.status, RunStatus::completed) << run.error;
  EXPECT_EQ(run.resumes, 1);
  EXPECT_NE(testing::read_file(run.environment.log_path).find("strategy ddp on 2 ranks"),
            std::string::npos);
  // Rank 1 ran on the other node: node2's slurmd launched a step of the job (srun's one task per
  // node), and the rank's log is there, under its global rank.
  EXPECT_NE(testing::read_file(cluster / "slurmd-node2.log").find("launch task StepId="),
            std::string::npos);
  const std::string stem = run.environment.log_path.substr(0, run.environment.log_path.size() - 4);
  EXPECT_TRUE(fs::exists(stem + "-rank1.log"));
  const auto across = figures_by_variant(db());
  EXPECT_FALSE(across.empty());
  EXPECT_EQ(across, figures_by_variant(reference_db));
}

// A plugin's model on Slurm: each array task (and each rank inside one) loads the library the
// run's resolved config records, checked against its SHA-256.
TEST_F(SlurmTest, ArrayTasksLoadTheExperimentsPlugin) {
  fs::create_directories(dir.path() / "lib");
  fs::copy_file(std::string(TRAINYARD_PLUGIN_DIR) + "/mlp/libmlp.so",
                dir.path() / "lib" / "libmlp.so");
  const std::string file = dir.write("mlp.yaml", R"(name: mlp-slurm
plugins: [lib/libmlp.so]
model: {name: mlp, image_size: 8, hidden: 16, num_classes: 3}
dataset: {name: synthetic-images, num_classes: 3, image_size: 8, train_size: 64, val_size: 16, test_size: 16}
train: {epochs: 1, batch_size: 16, optimizer: {name: adam, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: single
    - name: ddp
      set: {runtime.strategy: ddp, runtime.devices: 2}
)");
  const Result submitted = trainyard("submit " + file + " --slurm --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  ASSERT_TRUE(wait_for([&] { return all_ended(); }, 120))
      << trainyard("status --db " + db()).output;
  const auto runs = Store(db()).runs();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) EXPECT_EQ(run.status, RunStatus::completed) << run.error;
}

// With accounting off, status shows Slurm's state from squeue; a task killed without a word is
// recorded crashed (Slurm cannot say why), and submitting again continues it from its checkpoint.
TEST_F(SlurmTest, StatusWithAccountingOffAndAKilledTaskContinuedBySubmittingAgain) {
  const std::string file = long_experiment("killed");
  ASSERT_EQ(
      shell("sacct -n 2>&1").output.find("accounting storage is disabled") == std::string::npos,
      false);
  const Result submitted = trainyard("submit " + file + " --slurm --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  ASSERT_TRUE(wait_for_checkpoint_inside_an_epoch(/*first_epoch=*/false));
  const Result status = trainyard("status --db " + db());
  EXPECT_NE(status.output.find("Slurm job " + job_of_first_run() + ": RUNNING"), std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("1 running"), std::string::npos) << status.output;
  // SIGKILL to the task: no word from it, and with accounting off none from Slurm either.
  ASSERT_EQ(
      shell("pkill -9 -f '[s]lurm-task --submission " + submission(1).string() + "'").exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return all_ended(); }, 60)) << trainyard("status --db " + db()).output;
  RunRecord run = Store(db()).runs().front();
  EXPECT_EQ(run.status, RunStatus::failed);
  EXPECT_EQ(run.failure, FailureClass::crashed);
  EXPECT_NE(run.error.find("accounting off"), std::string::npos) << run.error;
  EXPECT_NE(run.error.find("last lines of " + run.environment.log_path), std::string::npos)
      << run.error;
  const Result again = trainyard("submit " + file + " --slurm --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("1 run (1 continue where they stopped)"), std::string::npos)
      << again.output;
  ASSERT_TRUE(wait_for([&] { return all_ended(); }, 120))
      << trainyard("status --db " + db()).output;
  run = Store(db()).runs().front();
  EXPECT_EQ(run.status, RunStatus::completed) << run.error;
  EXPECT_EQ(run.resumes, 1);
  EXPECT_EQ(Store(db()).runs().size(), 1u);
  EXPECT_NE(testing::read_file(run.environment.log_path).find("from its checkpoint at epoch"),
            std::string::npos);
}

// A study (sweep.search) submitted to Slurm trains in one job, into a database of its own.
// Slurm's time-limit warning in the middle of it (the job requeues itself), then `scontrol requeue`
// (what preemption does: SIGTERM, then Slurm starts the job again), and it replays to the trials,
// decisions, best settings and confirmation of the same study under `trainyard run`; collect takes
// it into the database, and the report job's report has its section. Submitted again while its job
// waits, and once it is collected, complete, it is left alone.
TEST_F(SlurmTest, AStudyRequeuedMidwayEndsAsTheSameStudyAsUnderRun) {
  // 4096 training samples: an epoch takes tenths of a second, so that the signals below land while
  // the study runs (in the warm engine a trial of 64 samples took milliseconds, the whole study
  // less than the test's polling could catch).
  const std::string file = dir.write("searched.yaml", R"(name: searched
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 4096, val_size: 32, test_size: 32, num_classes: 4, image_size: 8}
train: {epochs: 4, batch_size: 16, seed: 5, log_every: 100, save_weights: true, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 1, data_workers: 0}
sweep:
  search:
    method: random
    trials: 6
    seed: 3
    space:
      train.optimizer.lr: {log_uniform: [1.0e-4, 3.0e-2]}
      train.optimizer.weight_decay: {choice: [0.0, 0.1]}
    metric: val_loss
    schedule: {name: successive-halving, grace_epochs: 1, reduction: 3}
    confirm_repeats: 1
)");
  Result submitted;
  const std::string reference_db = reference_then_submitted(file, submitted);
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(submitted.output.find("1 study"), std::string::npos) << submitted.output;
  const Result again = trainyard("submit " + file + " --slurm --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("searched/default: the study is"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("nothing to submit"), std::string::npos) << again.output;

  // Its database, once `count` trials have reached the first rung.
  const fs::path studies = dir.path() / "runs" / "slurm" / "studies" / "searched";
  auto trials_reached = [&](int count) {
    if (!fs::exists(studies)) return false;
    for (const auto& entry : fs::directory_iterator(studies)) {
      if (entry.path().extension() != ".db") continue;
      try {
        Store store(entry.path().string());
        int reached = 0;
        for (const StudyProgress& p : store.study_progress())
          for (const StudyTrialRow& t : store.study_trials(p.key)) reached += t.figure ? 1 : 0;
        return reached >= count;
      } catch (const std::exception&) {  // created but not yet migrated
        return false;
      }
    }
    return false;
  };
  const std::string job = study_job_of(1);
  auto job_output = [&] {
    return shell("cat " + submission(1).string() + "/slurm-study0-*.out").output;
  };
  // Slurm's warning before the time limit after two trials: the job requeues itself. Then
  // `scontrol requeue` (preemption) after four.
  ASSERT_TRUE(wait_for([&] { return trials_reached(2); }, 120)) << job_output();
  ASSERT_EQ(shell("scancel -b -s USR1 " + job).exit_code, 0);
  ASSERT_TRUE(wait_for(
      [&] { return job_output().find("(restart 1)") != std::string::npos && trials_reached(4); },
      120))
      << job_output();
  ASSERT_EQ(shell("scontrol requeue " + job).exit_code, 0);

  // Done when the report job has written the report (after the study's job, whatever became of
  // it).
  const fs::path report = submission(1) / "report.html";
  ASSERT_TRUE(wait_for([&] { return fs::exists(report); }, 240))
      << shell("squeue --me; cat " + submission(1).string() + "/slurm-*.out").output;
  const std::string output = job_output();
  EXPECT_NE(output.find("checkpointed; requeueing Slurm job " + job), std::string::npos) << output;
  EXPECT_NE(output.find("as Slurm job " + job + " (restart 2)"), std::string::npos) << output;
  EXPECT_NE(testing::read_file(report).find("<h3>Study: default"), std::string::npos);

  const Result collect = trainyard("collect --db " + db());
  ASSERT_EQ(collect.exit_code, 0) << collect.output;
  Store collected(db()), undisturbed(reference_db);
  const std::vector<StudyProgress> ours = collected.study_progress();
  ASSERT_EQ(ours.size(), 1u) << collect.output;
  const StudyKey key = ours[0].key;
  ASSERT_EQ(undisturbed.study_progress().at(0).key.study_hash, key.study_hash);
  const auto trials = collected.study_trials(key), expected = undisturbed.study_trials(key);
  ASSERT_EQ(trials.size(), expected.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].values, expected[i].values) << "trial " << i;
    EXPECT_EQ(trials[i].epochs, expected[i].epochs) << "trial " << i;
    EXPECT_EQ(trials[i].figure, expected[i].figure) << "trial " << i;
    ASSERT_TRUE(collected.run(trials[i].run_id)) << "trial " << i << "'s run is not taken in";
    EXPECT_EQ(collected.run(trials[i].run_id)->config_hash, trials[i].config_hash);
  }
  const auto decisions = collected.study_decisions(key);
  const auto expected_decisions = undisturbed.study_decisions(key);
  ASSERT_EQ(decisions.size(), 2u);
  ASSERT_EQ(decisions.size(), expected_decisions.size());
  for (size_t r = 0; r < decisions.size(); ++r) {
    EXPECT_EQ(decisions[r].evidence, expected_decisions[r].evidence);
    EXPECT_EQ(decisions[r].promoted, expected_decisions[r].promoted);
  }
  ASSERT_TRUE(collected.study_outcome(key));
  ASSERT_TRUE(collected.study_outcome(key)->best_trial);
  EXPECT_EQ(collected.study_outcome(key)->best_trial, undisturbed.study_outcome(key)->best_trial);
  EXPECT_EQ(collected.study_outcome(key)->values, undisturbed.study_outcome(key)->values);
  // Every trial and the confirmation trained to the same figures and weights.
  testing::expect_same_training(db(), reference_db);
  EXPECT_EQ(collected.runs().size(), undisturbed.runs().size());
  // Taken in once: collecting again changes nothing.
  const Result twice = trainyard("collect --db " + db());
  EXPECT_EQ(twice.output.find("taken in"), std::string::npos) << twice.output;
  EXPECT_EQ(Store(db()).runs().size(), undisturbed.runs().size());
  // Its outcome and confirmation collected, submitting again submits nothing.
  const Result done = trainyard("submit " + file + " --slurm --db " + db());
  EXPECT_NE(done.output.find("searched/default: the study and its confirmations completed"),
            std::string::npos)
      << done.output;
  EXPECT_NE(done.output.find("nothing to submit: 1 already completed"), std::string::npos)
      << done.output;
}

// The cluster's one node with 3 CPUs (on this 2-core machine): a study's job and two trials' jobs
// beside it.
class SlurmStudyJobsTest : public SlurmTest {
 protected:
  int cluster_cpus() const override { return 3; }
};

// A study with sweep.search.parallel 2 under `submit --slurm`: its job trains no trial itself, and
// each trial is a Slurm job of its own, two at once beside it. Slurm's warning before the study's
// job's time limit while two trials train: they stop through srun (SIGUSR2, which srun forwards;
// SIGTERM it would turn into SIGKILL), each writing its checkpoint where it stands, and the job
// requeues itself; started again, it trains them on from there. Then the study's job SIGKILLed:
// Slurm ends the trials' jobs with their sruns. A job left under a trial's name (what a study's job
// on a node that failed could leave behind: here one started by hand) is cancelled by the study's
// next job before it trains that trial again. The study ends as the same study under `trainyard
// run` (trials side by side on this machine): trials, figures, best, weights.
TEST_F(SlurmStudyJobsTest, TrialsSideBySideAreJobsOfTheirOwnThatStopRequeueAndOutliveAKill) {
  // 16000 samples: a trial trains for seconds. Its checkpoints every 97 steps tell when it is
  // inside an epoch, and a stop's checkpoint (at the step it stood) from theirs.
  const std::string file = dir.write("sidebyside.yaml", R"(name: sidebyside
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 16000, val_size: 32, test_size: 32, num_classes: 4, image_size: 8}
train: {epochs: 2, batch_size: 16, seed: 5, log_every: 1000, checkpoint_every_steps: 97, save_weights: true, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, data_workers: 0}
sweep:
  search:
    method: tpe
    trials: 4
    seed: 3
    parallel: 2
    space:
      train.optimizer.lr: {log_uniform: [1.0e-4, 3.0e-2]}
    metric: val_loss
    confirm_repeats: 0
)");
  // runtime.threads 0: a slot's share of this machine here; on Slurm, its job's one CPU. One
  // thread either way, so the figures are the same.
  Result submitted;
  const std::string reference_db = reference_then_submitted(file, submitted);
  ASSERT_FALSE(HasFailure());
  const std::string study_job = study_job_of(1);
  auto study_output = [&](int n) {
    return shell("cat " + submission(n).string() + "/slurm-study0-*.out").output;
  };
  // The trials' jobs Slurm runs now, id and name (named after their runs' files:
  // trainyard-run-...).
  auto trial_jobs = [] {
    std::vector<std::pair<std::string, std::string>> jobs;
    for (const std::string& line :
         split(shell("squeue --me -h -t RUNNING -o '%i %j'").output, '\n'))
      if (const auto fields = split(line, ' ');
          fields.size() == 2 && fields[1].starts_with("trainyard-run-"))
        jobs.emplace_back(fields[0], fields[1]);
    return jobs;
  };
  // How many trials have a checkpoint inside their first epoch.
  const fs::path studies = dir.path() / "runs" / "slurm" / "studies";
  auto inside_first_epoch = [&] {
    int count = 0;
    std::error_code ec;
    for (const auto& entry : fs::recursive_directory_iterator(studies, ec))
      if (entry.path().filename() == "trainer_state.json" &&
          entry.path().parent_path().extension() == ".state") {
        const auto state = nlohmann::json::parse(testing::read_file(entry.path()), nullptr, false);
        count += state.is_object() && state.value("epoch", -1) == 0 && state.value("batch", 0) > 0;
      }
    return count;
  };
  ASSERT_TRUE(wait_for([&] { return inside_first_epoch() == 2; }, 120)) << study_output(1);
  const auto running = trial_jobs();
  ASSERT_EQ(running.size(), 2u) << shell("squeue --me").output;
  for (const auto& [job, name] : running) EXPECT_NE(job, study_job);

  // The warning before the time limit, to the study's job.
  ASSERT_EQ(shell("scancel -b -s USR1 " + study_job).exit_code, 0);
  ASSERT_TRUE(wait_for(
      [&] {
        return study_output(1).find("(restart 1)") != std::string::npos && trial_jobs().size() == 2;
      },
      120))
      << study_output(1);
  EXPECT_NE(study_output(1).find("checkpointed; requeueing Slurm job " + study_job),
            std::string::npos)
      << study_output(1);

  // SIGKILL to the study's job (its batch step): its sruns die with it, and their jobs with them.
  ASSERT_EQ(shell("scancel -b -s KILL " + study_job).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return squeue_lists_none(); }, 60)) << shell("squeue --me").output;
  // A job under the first trial's name, as one left behind would be.
  const Result left = shell("sbatch --parsable --job-name=" + running[0].second +
                            " --output=/dev/null --wrap 'sleep 600'");
  ASSERT_EQ(left.exit_code, 0) << left.output;
  const std::string left_job = strip(left.output);

  const Result again = trainyard("submit " + file + " --slurm --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const fs::path report = submission(2) / "report.html";
  ASSERT_TRUE(wait_for([&] { return fs::exists(report); }, 240))
      << shell("squeue --me; cat " + submission(2).string() + "/slurm-*.out").output;
  const std::string output = study_output(2);
  EXPECT_NE(output.find("cancelled its earlier Slurm job " + left_job + " first"),
            std::string::npos)
      << output;
  // The job left is gone, and no trial's job is left (the report job may still be ending).
  EXPECT_EQ(shell("squeue --me -h -j " + left_job + " 2>/dev/null").output, "");
  EXPECT_TRUE(trial_jobs().empty()) << shell("squeue --me").output;

  const Result collect = trainyard("collect --db " + db());
  ASSERT_EQ(collect.exit_code, 0) << collect.output;
  Store collected(db()), undisturbed(reference_db);
  ASSERT_EQ(collected.study_progress().size(), 1u) << collect.output;
  const StudyKey key = collected.study_progress()[0].key;
  const auto trials = collected.study_trials(key), expected = undisturbed.study_trials(key);
  ASSERT_EQ(trials.size(), 4u);
  ASSERT_EQ(trials.size(), expected.size());
  std::set<std::string> jobs;
  int stopped_where_they_stood = 0;
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].values, expected[i].values) << "trial " << i;
    EXPECT_EQ(trials[i].figure, expected[i].figure) << "trial " << i;
    // Trained in a job of its own: not the study's (the second submission's job is a later id).
    const auto attributes = collected.attributes(trials[i].run_id);
    ASSERT_TRUE(attributes.count("slurm job")) << "trial " << i;
    EXPECT_EQ(attributes.at("engine process"), "a Slurm job of its own") << "trial " << i;
    jobs.insert(attributes.at("slurm job"));
    // The warning's stop: "continues from its checkpoint at epoch 1, batch B", B not one of the
    // checkpoints every 97 steps (a SIGKILL, which srun makes of SIGTERM, leaves only those).
    const std::string log =
        testing::read_file(collected.run(trials[i].run_id)->environment.log_path);
    for (size_t at = log.find("checkpoint at epoch 1, batch "); at != std::string::npos;
         at = log.find("checkpoint at epoch 1, batch ", at + 1)) {
      const int64_t batch = std::stoll(log.substr(at + 29));
      stopped_where_they_stood += batch % 97 != 0;
    }
  }
  EXPECT_GT(stopped_where_they_stood, 0) << "no trial stopped with a checkpoint where it stood";
  EXPECT_EQ(jobs.size(), trials.size()) << "two trials share a job";
  EXPECT_FALSE(jobs.count(study_job));
  ASSERT_TRUE(collected.study_outcome(key));
  ASSERT_TRUE(collected.study_outcome(key)->best_trial);
  EXPECT_EQ(collected.study_outcome(key)->best_trial, undisturbed.study_outcome(key)->best_trial);
  testing::expect_same_training(db(), reference_db);
}

// `trainyard cancel`: the running run checkpoints and is interrupted, the pending ones never start,
// the report job goes too.
TEST_F(SlurmTest, CancelStopsTheSubmission) {
  const std::string file = long_experiment("cancel", "sweep: {grid: {train.seed: [1, 2, 3]}}\n");
  const Result submitted = trainyard("submit " + file + " --slurm --max-parallel 1 --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  ASSERT_TRUE(wait_for_checkpoint_inside_an_epoch(/*first_epoch=*/false));
  const Result cancelled = trainyard("cancel --db " + db());
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.output;
  ASSERT_TRUE(wait_for([&] { return all_ended(); }, 60)) << trainyard("status --db " + db()).output;
  const auto runs = Store(db()).runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].status, RunStatus::interrupted) << runs[0].error;
  EXPECT_EQ(runs[0].failure, FailureClass::interrupted) << runs[0].error;
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].status, RunStatus::interrupted) << runs[i].error;
    EXPECT_EQ(runs[i].failure, FailureClass::not_started) << runs[i].error;
  }
  EXPECT_TRUE(wait_for([] { return shell("squeue --me -h").output.empty(); }, 30))
      << shell("squeue --me").output;
  EXPECT_TRUE(Store(db()).submissions().front().cancelled);
}

}  // namespace
}  // namespace trainyard
