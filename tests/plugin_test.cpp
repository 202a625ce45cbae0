// Plugins end to end, as a user meets them: the examples and the broken plugins of tests/plugins
// are built against the installed SDK (the ctest fixture plugin_sdk, tests/plugins/build.sh), and
// the installed trainyard runs experiment files that name them.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "components/weights/safetensors.h"
#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard::testing {
namespace {

namespace fs = std::filesystem;

std::string built(const std::string& project, const std::string& name) {
  return fmt::format("{}/{}/lib{}.so", TRAINYARD_PLUGIN_DIR, project, name);
}

// The mlp example's experiment, naming `plugin` (relative to the file, as a user writes it).
std::string mlp_experiment(const std::string& plugin, const std::string& variants = "") {
  return fmt::format(R"(name: mlp-plugin
{}
model: {{name: mlp, image_size: 8, hidden: 16, num_classes: 3}}
dataset: {{name: synthetic-images, num_classes: 3, image_size: 8, train_size: 96, val_size: 32,
          test_size: 32}}
train: {{epochs: 2, batch_size: 16, optimizer: {{name: adam, lr: 1.0e-3}}}}
runtime: {{accelerator: cpu}}
{})",
                     plugin.empty() ? "# no plugins" : "plugins: [" + plugin + "]", variants);
}

class PluginTest : public CliTest {
 protected:
  // The mlp example copied beside the experiment, as lib/libmlp.so.
  std::string experiment_with_mlp(const std::string& variants = "") {
    fs::create_directories(dir.path() / "lib");
    fs::copy_file(built("mlp", "mlp"), dir.path() / "lib" / "libmlp.so",
                  fs::copy_options::overwrite_existing);
    return dir.write("mlp.yaml", mlp_experiment("lib/libmlp.so", variants));
  }
};

// A plugin's model that cannot read its data is refused at validation with the sample's shape and
// the options that set it, where the run would have failed at night with LibTorch's bare
// "mat1 and mat2 shapes cannot be multiplied".
TEST_F(PluginTest, AModelThatCannotReadItsDataIsRefusedAtValidation) {
  const std::string file = experiment_with_mlp();
  const Result result = trainyard("validate " + file + " --set dataset.image_size=16");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("error: model 'mlp' cannot read dataset 'synthetic-images': on a "
                               "sample of Float [1, 3, 16, 16], its forward failed: mat1 and mat2 "
                               "shapes cannot be multiplied (1x768 and 192x16) (set by "
                               "model.image_size: 8, dataset.image_size: 16); make them agree"),
            std::string::npos)
      << result.output;
}

TEST_F(PluginTest, ExampleTrainsUnderSingleAndDdpAndShowsInTheReport) {
  const std::string file = experiment_with_mlp(R"(sweep:
  variants:
    - name: single
    - name: ddp
      set: {runtime.strategy: ddp, runtime.devices: 2}
)");
  Result list = trainyard("list models --plugin " + (dir.path() / "lib" / "libmlp.so").string());
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("two-layer perceptron (example plugin) [plugin "), std::string::npos)
      << list.output;
  Result validate = trainyard("validate " + file);
  ASSERT_EQ(validate.exit_code, 0) << validate.output;
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("2 completed"), std::string::npos) << run.output;
  Result report = trainyard(fmt::format("report --db {} -o {}/r.html", db(), dir.path().string()));
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string html = read_file(dir.path() / "r.html");
  EXPECT_NE(html.find((dir.path() / "lib" / "libmlp.so").string() + " (sha256 "),
            std::string::npos);
  EXPECT_NE(html.find("mlp-plugin"), std::string::npos);
}

// A study over a plugin's option trains what it says it tried (the study property test's plugin
// key): each trial's run has the proposed hidden units, and the settings the study stores and
// prints are read back from it.
TEST_F(PluginTest, AStudyOverAPluginsOptionTrainsWhatItSaysItTried) {
  auto study = [&](const std::string& name, const std::string& more) {
    std::string text = read_file(experiment_with_mlp(R"(sweep:
  search:
    method: random
    trials: 3
    confirm_repeats: 0
    metric: val_acc
    space:
      model.hidden: {int_uniform: [4, 32]}
)" + more));
    text.replace(text.find("epochs: 2"), 9, "epochs: 1");
    return dir.write(name, text);
  };
  // A setting searched both as a parameter and inside a chosen mapping: refused by name.
  const Result twice = trainyard(
      "validate " +
      study("twice.yaml",
            "      model: {choice: [{name: mlp, image_size: 8, hidden: 6, num_classes: 3}]}\n"));
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_NE(twice.output.find("'model.hidden' is searched twice"), std::string::npos)
      << twice.output;
  const Result run = trainyard("run " + study("mlp_study.yaml", "") + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  int trials = 0;
  for (const StudyProgress& progress : store.study_progress())
    for (const StudyTrialRow& trial : store.study_trials(progress.key)) {
      ++trials;
      const std::string hidden = store.params(trial.run_id).at("model.hidden");
      const double proposed = nlohmann::json::parse(trial.values).at(0).get<double>();
      EXPECT_EQ(hidden, std::to_string(std::llround(proposed)));
      EXPECT_EQ(trial.settings, "hidden=" + hidden);
    }
  EXPECT_EQ(trials, 3);
}

// A language-model run whose file names a plugin is sampled with the plugin loaded (the run's
// config is read back as a worker reads it), by `sample` and in the report.
TEST_F(PluginTest, ALanguageModelRunThatNamesAPluginWritesSamples) {
  experiment_with_mlp();  // lib/libmlp.so beside the file
  const std::string file = dir.write("lm.yaml", R"(name: lm-with-plugin
plugins: [lib/libmlp.so]
model: {name: gpt2, vocab_size: 1200, max_positions: 16, depth: 1, width: 32, heads: 2}
dataset: {name: synthetic-tokens, vocab_size: 64, seq_len: 16, train_size: 64, val_size: 16, test_size: 16}
train: {epochs: 1, batch_size: 16, optimizer: {name: adamw, lr: 1.0e-2}, save_weights: true}
runtime: {accelerator: cpu, threads: 1}
)");
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string tokenizer = source("tests/fixtures/bpe_gpt2.json");
  Result sample =
      trainyard(fmt::format("sample 1 --db {} --tokens 8 --tokenizer {}", db(), tokenizer));
  EXPECT_EQ(sample.exit_code, 0) << sample.output;
  EXPECT_FALSE(sample.output.empty());
}

TEST_F(PluginTest, ARebuiltPluginIsANewConfiguration) {
  const std::string file = experiment_with_mlp();
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  Result again = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("0 completed, 1 already completed"), std::string::npos)
      << again.output;
  // Other bytes at the same path (a byte more at the end loads as before): not the run that
  // completed.
  {
    std::ofstream out(dir.path() / "lib" / "libmlp.so", std::ios::app | std::ios::binary);
    out << '\0';
  }
  Result rebuilt = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(rebuilt.exit_code, 0) << rebuilt.output;
  EXPECT_NE(rebuilt.output.find("1 completed, 0 already completed"), std::string::npos)
      << rebuilt.output;
}

// The installed engine exports to plugins what the public headers (include/trainyard/) declare —
// the registry, the option API, the seams' type information — and nothing else of trainyard: not
// the trainer, the store, the planner.
TEST_F(PluginTest, TheEngineExportsWhatThePublicHeadersDeclareAndHidesTheRest) {
  const std::string engine = (fs::path(TRAINYARD_EXE).parent_path() / "trainyard-engine").string();
  Result exported = shell("nm -DC --defined-only " + engine + " | grep 'trainyard::'");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  for (const char* symbol :
       {"trainyard::Registry::insert(", "typeinfo for trainyard::Model",
        "typeinfo for trainyard::UserError", "trainyard::report_unknown_keys(",
        "trainyard::default_capabilities(", "trainyard::traits(trainyard::Task)"})
    EXPECT_NE(exported.output.find(symbol), std::string::npos) << symbol;
  for (const char* symbol : {"trainyard::train_run(", "trainyard::Trainer::", "trainyard::Store::",
                             "trainyard::plan_run(", "trainyard::Controller::"})
    EXPECT_EQ(exported.output.find(symbol), std::string::npos) << symbol;
}

TEST_F(PluginTest, EachBadPluginIsRefusedWithItsFixAndNothingWritten) {
  fs::create_directories(dir.path() / "lib");
  const std::string text_file = dir.write("lib/notes.so", "not a library\n");
  struct Case {
    std::string plugin;
    std::string message;
  };
  const std::vector<Case> cases = {
      {(dir.path() / "lib" / "missing.so").string(), "no such file; build the plugin"},
      {text_file, "is not a shared library (not an ELF file)"},
      {built("bad", "no_entry"), "is a shared library but not a Trainyard plugin"},
      {built("bad", "throws"),
       "its entry point failed: the weights this plugin needs are not installed"},
      {built("bad", "takes_vit"), "model 'vit' is built in; rename its components"},
      {built("bad", "other_torch"),
       "LibTorch 2.10.0 (this trainyard: 2.11.0); rebuild the plugin against this Trainyard"},
      {built("bad", "future_api"), "plugin API version 7 (this trainyard: 6); rebuild"},
      {built("bad", "other_yaml_cpp"),
       fmt::format("yaml-cpp 0.8.0 (this trainyard: {}); rebuild", TRAINYARD_YAML_CPP_VERSION)},
      {built("bad", "old_abi"), "C++ string ABI (_GLIBCXX_USE_CXX11_ABI) 0 (this trainyard: 1)"},
      {built("bad", "strategy"),
       "registers strategy 'my-ddp': precisions and strategies cannot come from a plugin"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.plugin);
    const std::string file = dir.write("bad.yaml", mlp_experiment(c.plugin));
    Result run = trainyard("run " + file + " --db " + db());
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find(file + ":2:"), std::string::npos) << run.output;  // its place
    EXPECT_NE(run.output.find(c.message), std::string::npos) << run.output;
    EXPECT_FALSE(fs::exists(db())) << "the database was written";
  }
  // Two plugins with one name: both named.
  const std::string file = experiment_with_mlp();
  Result clash = trainyard(fmt::format("validate {} --plugin {}", file, built("bad", "takes_mlp")));
  EXPECT_EQ(clash.exit_code, 2) << clash.output;
  EXPECT_NE(clash.output.find(fmt::format("plugin '{}' registers names already taken: model 'mlp' "
                                          "is registered by plugin '{}' too",
                                          (dir.path() / "lib" / "libmlp.so").string(),
                                          built("bad", "takes_mlp"))),
            std::string::npos)
      << clash.output;
}

TEST_F(PluginTest, TheCommandLinePluginReachesEveryRun) {
  // No `plugins:` in the file: --plugin loads it, and the runs' workers load it from their config.
  const std::string plain = dir.write("plain.yaml", mlp_experiment(""));
  Result refused = trainyard("validate " + plain);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("unknown model 'mlp'"), std::string::npos) << refused.output;
  Result dry = trainyard(
      fmt::format("run {} --db {} --dry-run --plugin {}", plain, db(), built("mlp", "mlp")));
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  Result run =
      trainyard(fmt::format("run {} --db {} --plugin {}", plain, db(), built("mlp", "mlp")));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("1 completed"), std::string::npos) << run.output;
}

// The ResNet example trains under every strategy and a mixed precision, and shows in the report.
// Its BatchNorm statistics stay float32 under bf16-mixed, as under PyTorch's autocast.
TEST_F(PluginTest, ResNetTrainsUnderEveryStrategyAndShowsInTheReport) {
  const std::string file = dir.write("resnet.yaml", fmt::format(R"(name: resnet-example
plugins: [{}]
model: {{name: resnet18, num_classes: 4, image_size: 8, stem: cifar}}
dataset: {{name: synthetic-images, num_classes: 4, image_size: 8, train_size: 64, val_size: 16,
          test_size: 16}}
train: {{epochs: 1, batch_size: 8, save_weights: true, optimizer: {{name: sgd, lr: 0.02}}}}
runtime: {{accelerator: cpu, threads: 1}}
sweep:
  variants:
    - name: single
    - name: bf16-mixed
      set: {{runtime.precision: bf16-mixed}}
    - name: ddp
      set: {{runtime.strategy: ddp, runtime.devices: 2}}
    - name: zero2
      set: {{runtime.strategy: zero2, runtime.devices: 2}}
    - name: fsdp
      set: {{runtime.strategy: fsdp, runtime.devices: 2}}
)",
                                                                built("resnet", "resnet")));
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("5 completed"), std::string::npos) << run.output;
  Store store(db());
  for (const auto& r : store.runs("resnet-example")) {
    SCOPED_TRACE(r.variant);
    SafetensorsFile weights(fs::path(r.environment.log_path).replace_extension(".safetensors"));
    const SafetensorsEntry* mean = weights.find("layer4.1.bn2.running_mean");
    ASSERT_NE(mean, nullptr);
    EXPECT_EQ(mean->dtype, SafetensorsDtype::F32);
    if (r.variant == "fsdp") {  // one unit per residual block, and the root
      EXPECT_EQ(store.attributes(r.id).at("fsdp_units"), "8 blocks and the root");
    }
  }
  Result report = trainyard(fmt::format("report --db {} -o {}/r.html", db(), dir.path().string()));
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string html = read_file(dir.path() / "r.html");
  EXPECT_NE(html.find("resnet-example"), std::string::npos);
  EXPECT_NE(html.find(built("resnet", "resnet") + " (sha256 "), std::string::npos);
}

// A model that declares no blocks(): fsdp gathers it as one unit and the run details say so; one
// that cannot count its FLOPs gets no TFLOP/s or MFU figures (the report's "—"), not zeros.
TEST_F(PluginTest, AModelWithoutBlocksOrFlopsIsOneFsdpUnitWithoutMfu) {
  const std::string file = dir.write("plain.yaml", fmt::format(R"(name: plain
plugins: [{}]
model: {{name: plain-linear, image_size: 8, num_classes: 3}}
dataset: {{name: synthetic-images, num_classes: 3, image_size: 8, train_size: 64, val_size: 16,
          test_size: 16}}
train: {{epochs: 1, batch_size: 8, optimizer: {{name: adam, lr: 1.0e-3}}}}
runtime: {{accelerator: cpu, threads: 1, strategy: fsdp, devices: 2}}
)",
                                                               built("bad", "plain_linear")));
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  ASSERT_EQ(store.runs("plain").size(), 1u);
  const RunRecord r = store.runs("plain")[0];
  EXPECT_EQ(
      store.attributes(r.id).at("fsdp_units").rfind("one unit: the model declares no blocks()", 0),
      0u);
  const auto metrics = store.final_metrics(r.id);
  EXPECT_TRUE(metrics.count("samples_per_s"));
  EXPECT_FALSE(metrics.count("tflops"));
  EXPECT_FALSE(metrics.count("mfu"));
}

// In a batch of several files, a plugin's components are only the files' that name it (the
// registry is one), and one library reached through a symbolic link is loaded once.
TEST_F(PluginTest, APluginsComponentsBelongToTheFilesThatNameIt) {
  const std::string with = experiment_with_mlp();
  fs::create_symlink(dir.path() / "lib" / "libmlp.so", dir.path() / "lib" / "linked.so");
  // Its own name: two files of one name are refused in one batch, validate's included.
  std::string linked_text = mlp_experiment("lib/linked.so");
  linked_text.replace(0, std::string("name: mlp-plugin").size(), "name: mlp-linked");
  const std::string linked = dir.write("linked.yaml", linked_text);
  const std::string without = dir.write("without.yaml", mlp_experiment(""));
  Result batch = trainyard(fmt::format("validate {} {} {}", with, linked, without));
  EXPECT_EQ(batch.exit_code, 2) << batch.output;
  EXPECT_NE(batch.output.find(without + ":3:"), std::string::npos) << batch.output;
  EXPECT_NE(batch.output.find(fmt::format(
                "model 'mlp' comes from plugin '{}', which this experiment does not name",
                (dir.path() / "lib" / "libmlp.so").string())),
            std::string::npos)
      << batch.output;
  EXPECT_EQ(batch.output.find("already taken"), std::string::npos) << batch.output;
  Result named = trainyard(fmt::format("validate {} {}", with, linked));
  EXPECT_EQ(named.exit_code, 0) << named.output;
}

// The ResNet example (BatchNorm buffers) under ddp, its controller SIGKILLed after a mid-epoch
// checkpoint in epoch 2: the next run continues it, and every figure (test accuracy included, which
// reads the running statistics) is the undisturbed run's, bit for bit.
TEST_F(PluginTest, ResNetUnderDdpContinuesBitForBitAfterAKill) {
  const std::string file = dir.write("resnet.yaml", fmt::format(R"(name: resnet-ddp
plugins: [{}]
model: {{name: resnet18, num_classes: 4, image_size: 8, stem: cifar}}
dataset: {{name: synthetic-images, num_classes: 4, image_size: 8, train_size: 192, val_size: 32,
          test_size: 32, noise: 0.3}}
train: {{epochs: 2, batch_size: 8, checkpoint_every_steps: 3,
        optimizer: {{name: sgd, lr: 0.02, momentum: 0.9}}}}
runtime: {{accelerator: cpu, threads: 1, strategy: ddp, devices: 2}}
)",
                                                                built("resnet", "resnet")));
  expect_a_kill_in_epoch_2_changes_nothing(dir, file, db());
}

// A plugin rebuilt while a batch runs: the runs started after the change are not trained with other
// code than their configuration names — each fails, naming the plugin and both hashes.
TEST_F(PluginTest, APluginChangedUnderARunningBatchIsNamedNotMixed) {
  const std::string file = experiment_with_mlp(R"(sweep:
  grid: {train.optimizer.lr: [1.0e-3, 2.0e-3, 3.0e-3]}
)");
  pid_t controller = start_run(file, db());
  KillOnExit guard{controller};
  // Once the first run trains, the controller has configured every run with the old bytes.
  bool training = false;
  for (int i = 0; i < 2400 && !training; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    training = fs::exists(dir.path() / "runs" / "logs" / "mlp-plugin");
  }
  ASSERT_TRUE(training);
  {
    std::ofstream out(dir.path() / "lib" / "libmlp.so", std::ios::app | std::ios::binary);
    out << '\0';
  }
  const int exit_code = exit_code_of(controller);
  EXPECT_NE(exit_code, 0);
  Store store(db());
  int changed = 0;
  for (const auto& run : store.runs("mlp-plugin"))
    if (run.status == RunStatus::failed) {
      EXPECT_NE(run.error.find("changed after this run was configured (sha256 was "),
                std::string::npos)
          << run.error;
      ++changed;
    }
  EXPECT_GE(changed, 2) << "the runs after the change were not refused";
}

// The ResNet study as shipped names the plugin scripts/build_examples.sh builds and a placeholder
// CIFAR-10 path; with both in place it validates, and on a machine without a GPU every run is
// skipped with the reason.
TEST_F(PluginTest, TheResNetStudyValidatesWithItsPlugin) {
  for (const auto& name : kCifar10Files) dir.write("cifar-10-batches-bin/" + name, "");
  const std::string study = source("experiments/resnet_cifar10.yaml");
  const std::string files =
      fmt::format(" --set dataset.root={}/cifar-10-batches-bin --set plugins=[{}]",
                  dir.path().string(), built("resnet", "resnet"));
  Result validate = trainyard("validate " + study + files);
  EXPECT_EQ(validate.exit_code, 0) << validate.output;
  EXPECT_NE(validate.output.find("5 runs"), std::string::npos) << validate.output;
  Result run = trainyard("run " + study + " --db " + db() + files);
  EXPECT_EQ(run.exit_code, 3) << run.output;  // nothing ran: every run skipped
  EXPECT_NE(run.output.find("0 completed, 0 already completed, 5 skipped"), std::string::npos)
      << run.output;
}

// --time-limit: the running run stops (checkpointed), the rest are listed as not started, and the
// next `trainyard run` finishes the batch. The test plugin slow-linear sleeps 20 ms in each
// forward, so that 'long' trains for 12 s on any machine: the 8 s limit passes after its first
// checkpoints (every 25 steps) and before its end. It runs alone (tests/serial_tests.cmake): the
// worker's start must not take the limit's time on a machine busy with other tests.
TEST_F(PluginTest, ATimeLimitStopsInTimeAndTheNextRunFinishes) {
  const std::string slow = dir.write("slow.yaml", fmt::format(R"(name: slow
plugins: [{}]
model: {{name: slow-linear, step_ms: 20}}
dataset: {{name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4}}
train: {{epochs: 2, batch_size: 16, log_every: 1000, checkpoint_every_steps: 25}}
runtime: {{accelerator: cpu, threads: 1}}
sweep: {{variants: [{{name: long, set: {{dataset.train_size: 9600, train.epochs: 1}}}}, {{name: later}}]}}
)",
                                                              built("bad", "slow_linear")));
  const auto start = std::chrono::steady_clock::now();
  Result stopped = trainyard("run " + slow + " --db " + db() + " --time-limit 8s");
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(stopped.exit_code, 75) << stopped.output;  // not 130: that is Ctrl-C
  // In time: not before the limit, and within a few seconds of it (the checkpoint where 'long'
  // stands, the controller's exit), where 'long' alone would take 12 s.
  EXPECT_GE(elapsed, 8.0);
  EXPECT_LT(elapsed, 8.0 + 3.0);
  EXPECT_NE(
      stopped.output.find("0 failed, 1 interrupted, 1 not started, stopped at --time-limit 8s"),
      std::string::npos)
      << stopped.output;
  EXPECT_NE(stopped.output.find("run the same command again to continue"), std::string::npos);
  {
    Store store(db());
    const auto runs = store.runs("slow");
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].status, RunStatus::interrupted);
    EXPECT_EQ(runs[0].failure, FailureClass::interrupted);
    EXPECT_NE(runs[0].error.find("--time-limit 8s"), std::string::npos) << runs[0].error;
    EXPECT_EQ(runs[1].failure, FailureClass::not_started);
    EXPECT_NE(runs[1].error.find("not started"), std::string::npos) << runs[1].error;
  }
  // The next batch continues 'long' from its checkpoint and starts 'later', each under its id.
  Result rest = trainyard("run " + slow + " --db " + db());
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_NE(rest.output.find("continues from its checkpoint at epoch 1, batch "), std::string::npos)
      << rest.output;
  Store store(db());
  const auto runs = store.runs("slow");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, RunStatus::completed);
  EXPECT_EQ(runs[0].resumes, 1);
  EXPECT_EQ(runs[1].status, RunStatus::completed);
}

}  // namespace
}  // namespace trainyard::testing
