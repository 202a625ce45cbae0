// The warm engine (runner/launcher.h's WarmEngine; ARCHITECTURE.md, "A warm engine"): runs trained
// one after another by one kept process compute what each computes in a process of its own, and a
// warm worker killed mid-run leaves a run that continues bit for bit in a fresh one. Run by the
// installed trainyard, with the mlp example plugin built against the SDK (ctest fixture
// plugin_sdk), as plugin_tests are.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard::testing {
namespace {

namespace fs = std::filesystem;

std::string mlp_library() { return fmt::format("{}/mlp/libmlp.so", TRAINYARD_PLUGIN_DIR); }

// Every step record of every run, keyed as training_figures keys its figures.
std::map<std::string, double> step_records(const std::string& db) {
  Store store(db);
  std::map<std::string, double> out;
  for (const RunRecord& run : store.runs())
    for (const StepRow& row : store.step_metrics(run.id))
      for (const auto& [key, value] : row.values)
        if (!is_wall_clock_figure(key))
          out[fmt::format("{}/{}/{}/step {}/{}", run.experiment, run.variant, run.config_hash,
                          row.step, key)] = value;
  return out;
}

// Each run's end (status and error) and how its process started, by experiment/variant/config.
std::map<std::string, std::pair<std::string, std::string>> run_ends(const std::string& db) {
  Store store(db);
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const RunRecord& run : store.runs()) {
    const auto attributes = store.attributes(run.id);
    const auto process = attributes.find("engine process");
    out[run.experiment + "/" + run.variant + "/" + run.config_hash] = {
        std::string(to_string(run.status)) + " " + run.error,
        process == attributes.end() ? "" : process->second};
  }
  return out;
}

// A study's trials (settings, figures, status) and its decisions, as text to compare.
std::string study_record(const std::string& db) {
  Store store(db);
  std::string out;
  for (const StudyProgress& progress : store.study_progress()) {
    for (const StudyTrialRow& trial : store.study_trials(progress.key))
      out += fmt::format("trial {} ({}): {} epochs, {}\n", trial.trial, trial.settings,
                         trial.epochs, trial.figure ? fmt::format("{}", *trial.figure) : "none");
    for (const StudyDecisionRow& decision : store.study_decisions(progress.key))
      out += fmt::format("decision at {}: {} from {}\n", decision.epochs, decision.promoted,
                         decision.evidence);
  }
  return out;
}

class WarmEngineTest : public CliTest {
 protected:
  // Four files, one batch: precisions, thread counts, a run failing on its data then one that
  // must not notice, a 2-rank ddp run between single-process ones, a TorchScript model, a plugin's
  // model, and a study whose trials pause at a rung and are promoted from their checkpoints. Every
  // run saves its weights; steps are recorded every 2.
  std::vector<std::string> batch() {
    const std::string vit =
        "{name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, "
        "num_classes: 4, dropout: 0.1}";
    const std::string images =
        "{name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4, "
        "image_size: 8}";
    const std::string train_options =
        "epochs: 2, batch_size: 16, seed: 7, log_every: 2, save_weights: true";
    std::vector<std::string> files;
    files.push_back(
        dir.write("mix.yaml", fmt::format(R"(name: mix
model: {}
dataset: {}
train: {{{}, optimizer: {{name: adamw, lr: 1.0e-3}}}}
runtime: {{accelerator: cpu, threads: 2, data_workers: 0}}
sweep:
  variants:
    - name: fp32
    - name: bf16-mixed
      set: {{runtime.precision: bf16-mixed}}
    - name: one-thread
      set: {{runtime.threads: 1}}
    - name: bad-data
      set: {}
    - name: after-bad-data
      set: {{train.optimizer.lr: 2.0e-3}}
    - name: ddp
      set: {{runtime.strategy: ddp, runtime.devices: 2}}
    - name: after-ddp
      set: {{train.seed: 8}}
)",
                                          vit, images, train_options, failing_data_set(dir))));
    files.push_back(dir.write(
        "script.yaml", fmt::format(R"(name: script
model: {{name: torchscript, file: {}, image_size: 8}}
dataset: {{name: synthetic-images, num_classes: 4, image_size: 8, train_size: 64, val_size: 32,
          test_size: 32}}
train: {{{}, optimizer: {{name: sgd, lr: 1.0e-2}}}}
runtime: {{accelerator: cpu, threads: 2, data_workers: 0}}
)",
                                   source("tests/fixtures/torchscript_cnn.pt"), train_options)));
    files.push_back(dir.write("mlp.yaml", fmt::format(R"(name: mlp
plugins: [{}]
model: {{name: mlp, image_size: 8, hidden: 16, num_classes: 4}}
dataset: {}
train: {{{}, optimizer: {{name: adam, lr: 1.0e-3}}}}
runtime: {{accelerator: cpu, threads: 2, data_workers: 0}}
)",
                                                      mlp_library(), images, train_options)));
    files.push_back(dir.write("study.yaml", fmt::format(R"(name: study
model: {}
dataset: {}
train: {{epochs: 3, batch_size: 16, seed: 5, log_every: 2, save_weights: true,
        optimizer: {{name: adamw, lr: 1.0e-3}}}}
runtime: {{accelerator: cpu, threads: 2, data_workers: 0}}
sweep:
  search:
    method: tpe
    trials: 4
    seed: 3
    space:
      train.optimizer.lr: {{log_uniform: [1.0e-4, 3.0e-2]}}
    metric: val_loss
    schedule: {{name: successive-halving, grace_epochs: 1, reduction: 2}}
    confirm_repeats: 1
)",
                                                        vit, images)));
    return files;
  }
};

// Every clock-free figure, step record and saved weight of a warm batch is the same batch's with a
// fresh process per run (--fresh-engine); so are the failed run's error and the study's trials and
// decisions. And the warm batch did keep its engine: runs after the first took a warm one, but not
// the run after the failed one, the ddp run and the one after it (the ddp run ended the engine).
TEST_F(WarmEngineTest, AWarmBatchTrainsWhatFreshProcessesTrain) {
  std::string files;
  for (const std::string& file : batch()) files += " " + file;
  const std::string warm_db = (dir.path() / "warm.db").string();
  const std::string fresh_db = (dir.path() / "fresh.db").string();
  const Result warm = trainyard("run" + files + " --db " + warm_db);
  const Result fresh = trainyard("run" + files + " --db " + fresh_db + " --fresh-engine");
  EXPECT_EQ(warm.exit_code, 1) << warm.output;  // the bad-data run failed, the batch went on
  EXPECT_EQ(fresh.exit_code, 1) << fresh.output;

  expect_same_training(warm_db, fresh_db);
  const auto steps = step_records(warm_db);
  EXPECT_GT(steps.size(), 40u);
  EXPECT_EQ(steps, step_records(fresh_db));
  const std::string study = study_record(warm_db);
  EXPECT_NE(study.find("decision at 1"), std::string::npos) << study;
  EXPECT_EQ(study, study_record(fresh_db));

  const auto warm_ends = run_ends(warm_db), fresh_ends = run_ends(fresh_db);
  ASSERT_EQ(warm_ends.size(), fresh_ends.size());
  int warm_runs = 0;
  for (const auto& [run, end] : warm_ends) {
    SCOPED_TRACE(run);
    ASSERT_TRUE(fresh_ends.count(run));
    EXPECT_EQ(end.first, fresh_ends.at(run).first);  // status and error
    EXPECT_EQ(fresh_ends.at(run).second, "fresh");
    if (end.second.rfind("warm: its run ", 0) == 0) ++warm_runs;
    // (The study runs first; its engine trains mix/fp32 next.)
    const bool starts_fresh = run.rfind("mix/after-bad-data/", 0) == 0 ||
                              run.rfind("mix/ddp/", 0) == 0 || run.rfind("mix/after-ddp/", 0) == 0;
    if (starts_fresh) {
      EXPECT_EQ(end.second, "fresh");
    }
  }
  EXPECT_GE(warm_runs, 8) << "runs that a warm engine trained";
  EXPECT_NE(warm_ends
                .at([&] {
                  for (const auto& [run, end] : warm_ends)
                    if (run.rfind("mix/bad-data/", 0) == 0) return run;
                  return std::string();
                }())
                .first.find("is not a whole number of 3073-byte records"),
            std::string::npos);
}

// The pid of the warm worker (`trainyard worker --serve`) under `controller`, once there is one.
pid_t warm_worker_of(pid_t controller) {
  for (int i = 0; i < 600; ++i) {
    for (pid_t child : children_of(controller)) {
      const std::string cmdline = read_file(fmt::format("/proc/{}/cmdline", child));
      if (cmdline.find("--serve") != std::string::npos) return child;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return -1;
}

// The run of `variant` has recorded `epoch` (60 s at most).
bool recorded_epoch(const std::string& db, const std::string& variant, int64_t epoch) {
  for (int i = 0; i < 600; ++i) {
    if (fs::exists(db)) {
      Store store(db);
      for (const RunRecord& run : store.runs())
        if (run.variant == variant)
          for (const EpochRow& row : store.epoch_metrics(run.id))
            if (row.epoch == epoch) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// kill -9 of a warm worker in the middle of the second run it trains: the run is retried
// (--retries 1) in a fresh process from its checkpoint, and every figure and weight of the batch
// is an undisturbed batch's, bit for bit.
TEST_F(WarmEngineTest, AWarmWorkerKilledMidRunLeavesARunThatContinuesBitForBit) {
  const std::string file = dir.write("three.yaml", R"(name: three
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4, dropout: 0.1}
dataset: {name: synthetic-images, train_size: 256, val_size: 32, test_size: 32, num_classes: 4, image_size: 8}
train: {epochs: 3, batch_size: 8, seed: 7, log_every: 4, save_weights: true,
        checkpoint_every_steps: 4, optimizer: {name: adamw, lr: 1.0e-3}}
runtime: {accelerator: cpu, threads: 1, data_workers: 0}
sweep:
  variants: [{name: first}, {name: second, set: {train.seed: 8}}, {name: third, set: {train.seed: 9}}]
)");
  const std::string reference = (dir.path() / "reference.db").string();
  const Result undisturbed = trainyard("run " + file + " --db " + reference);
  ASSERT_EQ(undisturbed.exit_code, 0) << undisturbed.output;

  const pid_t controller = start_run(file, db(), {"--retries", "1"});
  KillOnExit guard{controller};
  const pid_t worker = warm_worker_of(controller);
  ASSERT_GT(worker, 0);
  ASSERT_TRUE(recorded_epoch(db(), "second", 1)) << "the second run never reached epoch 1";
  ASSERT_EQ(kill(worker, 0), 0) << "the worker that trained the first run is gone";
  ASSERT_EQ(warm_worker_of(controller), worker) << "the second run is not in the first's worker";
  kill(worker, SIGKILL);
  EXPECT_EQ(exit_code_of(controller), 0);

  expect_same_training(db(), reference);
  // It continued from its checkpoint, not from the start (which would give the same figures).
  std::string second_log;
  for (const auto& entry : fs::directory_iterator(dir.path() / "runs" / "logs" / "three"))
    if (entry.path().filename().string().find("-second-") != std::string::npos &&
        entry.path().filename().string().ends_with("-rank0.log"))
      second_log = read_file(entry.path());
  EXPECT_NE(second_log.find("resumed from "), std::string::npos) << second_log;
  const auto ends = run_ends(db());
  for (const auto& [run, end] : ends) {
    SCOPED_TRACE(run);
    EXPECT_EQ(end.first, "completed ");
    // The retried run's attempt started a fresh process, which trained the run after it warm.
    if (run.rfind("three/second/", 0) == 0) {
      EXPECT_EQ(end.second, "fresh");
    } else if (run.rfind("three/third/", 0) == 0) {
      EXPECT_EQ(end.second, "warm: its run 2");
    }
  }
}

}  // namespace
}  // namespace trainyard::testing
