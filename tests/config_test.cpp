// Experiment files: every class of bad config, layering (extends, --set), sweep expansion.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "runner/config/experiment.h"
#include "runner/config/layering.h"
#include "runner/config/run_spec.h"
#include "tests/test_support.h"

namespace trainyard {
namespace {

using testing::TempDir;

const char* const kValid = R"(name: demo
model:
  name: toy
  width: 16
dataset:
  name: toy-data
  root: /data
train:
  epochs: 2
  optimizer: {name: adam, lr: 0.01}
runtime:
  accelerator: cpu
)";

class ConfigTest : public ::testing::Test {
 protected:
  Experiment load(const std::string& text, const std::vector<std::string>& overrides = {}) {
    return load_experiment(dir.write("exp.yaml", text), overrides, registry);
  }
  // Loads `text`, expecting a ConfigError; returns its diagnostics.
  Diagnostics errors(const std::string& text, const std::vector<std::string>& overrides = {}) {
    try {
      load(text, overrides);
    } catch (const ConfigError& e) {
      return e.diagnostics();
    }
    ADD_FAILURE() << "expected a ConfigError";
    return {};
  }
  static bool has(const Diagnostics& d, const std::string& needle) {
    for (const auto& item : d.items())
      if (item.message.find(needle) != std::string::npos) return true;
    return false;
  }

  TempDir dir;
  Registry registry = testing::fake_registry();
};

TEST_F(ConfigTest, ValidFileResolvesEveryOptionWithDefaults) {
  Experiment e = load(kValid);
  EXPECT_EQ(e.name, "demo");
  ASSERT_EQ(e.runs.size(), 1u);
  const RunSpec& run = e.runs[0];
  EXPECT_EQ(run.variant, "default");
  EXPECT_EQ(run.model.name, "toy");
  EXPECT_EQ(run.model.options.find("width")->node.Scalar(), "16");
  EXPECT_EQ(run.model.options.find("act")->node.Scalar(), "relu");  // a default
  EXPECT_EQ(run.train.epochs, 2);
  EXPECT_EQ(run.train.batch_size, 16);  // a default
  EXPECT_EQ(run.optimizer.name, "adam");
  EXPECT_EQ(run.scheduler.name, "none");  // the default scheduler
  EXPECT_NE(run.config_yaml.find("act: relu"), std::string::npos);
  EXPECT_NE(run.config_yaml.find("batch_size: 16"), std::string::npos);
  EXPECT_EQ(run.config_hash.size(), 16u);
}

TEST_F(ConfigTest, NameDefaultsToTheFileStem) {
  std::string text = kValid;
  text.erase(0, text.find('\n') + 1);
  EXPECT_EQ(load(text).name, "exp");
}

TEST_F(ConfigTest, UnknownKeySuggestsTheClosestAndPointsAtTheKey) {
  std::string text = kValid;
  text.replace(text.find("  epochs: 2"), 11, "  epcohs: 2");
  Diagnostics d = errors(text);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d.items()[0].message.find("unknown key 'train.epcohs'"), std::string::npos);
  EXPECT_NE(d.items()[0].message.find("did you mean 'epochs'"), std::string::npos);
  EXPECT_EQ(d.items()[0].origin.line, 9);
  EXPECT_EQ(d.items()[0].origin.column, 3);
  EXPECT_NE(d.format().find("exp.yaml:9:3: error:"), std::string::npos);
  EXPECT_NE(d.format().find("  epcohs: 2\n    ^"), std::string::npos);  // the line and a caret
}

TEST_F(ConfigTest, UnknownTopLevelSection) {
  Diagnostics d = errors(std::string(kValid) + "trian: {epochs: 1}\n");
  EXPECT_TRUE(has(d, "unknown key 'trian'"));
  EXPECT_TRUE(has(d, "did you mean 'train'"));
}

TEST_F(ConfigTest, MisspeltSectionIsReportedAtItsOwnLine) {
  // Not at its first child's line: "trian:" is the mistake, not "epochs: 1" below it.
  const std::string text = std::string(kValid) + "trian:\n  epochs: 1\n  seed: 2\n";
  const int trian_line = static_cast<int>(std::count(kValid, kValid + strlen(kValid), '\n')) + 1;
  Diagnostics d = errors(text);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(has(d, "unknown key 'trian'"));
  EXPECT_EQ(d.items()[0].origin.line, trian_line);
  EXPECT_EQ(d.items()[0].origin.column, 1);

  std::string nested = kValid;  // one level down: train.early_stpo
  nested.replace(nested.find("  epochs: 2"), 11, "  epochs: 2\n  early_stpo:\n    patience: 3");
  d = errors(nested);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(has(d, "unknown key 'train.early_stpo'"));
  EXPECT_EQ(d.items()[0].origin.line, 10);
  EXPECT_EQ(d.items()[0].origin.column, 3);
}

TEST_F(ConfigTest, WrongTypeOutOfRangeAndUnknownEnumAreAllReportedAtOnce) {
  std::string text = kValid;
  text.replace(text.find("epochs: 2"), 9, "epochs: -1");
  text.replace(text.find("width: 16"), 9, "width: wide");
  text.replace(text.find("accelerator: cpu"), 16, "accelerator: tpu");
  Diagnostics d = errors(text + "  precision: 16-mixed\n");
  EXPECT_EQ(d.size(), 3u) << d.format();
  EXPECT_TRUE(has(d, "'model.width' must be an integer, got 'wide'"));
  EXPECT_TRUE(has(d, "'train.epochs' must be ≥ 0, got -1"));
  EXPECT_TRUE(has(d, "'runtime.accelerator' has unknown value 'tpu'"));
  EXPECT_TRUE(has(d, "expected one of: cpu, cuda, auto"));
}

TEST_F(ConfigTest, FloatGivenForAnIntegerIsATypeError) {
  std::string text = kValid;
  text.replace(text.find("epochs: 2"), 9, "epochs: 1.5");
  EXPECT_TRUE(has(errors(text), "'train.epochs' must be an integer, got '1.5'"));
}

TEST_F(ConfigTest, MappingWhereAValueBelongsIsAnError) {
  // Flattened, "epochs: {value: 3}" is a key below 'train.epochs': it must not be skipped as
  // known and leave the default in place.
  std::string text = kValid;
  text.replace(text.find("epochs: 2"), 9, "epochs: {value: 3}");
  EXPECT_TRUE(has(errors(text), "'train.epochs' must be an integer, got a mapping"));
}

TEST_F(ConfigTest, MappingWhereASweepOrTopLevelValueBelongsIsAnError) {
  EXPECT_TRUE(has(errors(std::string(kValid) + "sweep:\n  variants: {name: a}\n"),
                  "'sweep.variants' must be a non-empty list of {name, set}, got a mapping"));
  EXPECT_TRUE(has(errors(std::string(kValid) + "sweep:\n  repeats: {n: 3}\n"),
                  "'sweep.repeats' must be an integer, got a mapping"));
  std::string named = kValid;
  named.replace(0, named.find('\n'), "name: {x: 1}");
  EXPECT_TRUE(has(errors(named), "'name' must be a non-empty string, got a mapping"));
}

TEST_F(ConfigTest, AProblemOfSomeVariantsNamesThem) {
  const std::string text = std::string(kValid) +
                           "sweep:\n  variants:\n    - name: a\n    - name: b\n      set: "
                           "{train.optimizer: {name: sgd, lr: 0.1}}\n    - name: c\n";
  Diagnostics d = errors(text, {"train.optimizer.momentum=0.9", "train.bogus=1"});
  ASSERT_EQ(d.size(), 3u) << d.format();
  EXPECT_TRUE(has(d,
                  "variants 'a', 'c': unknown key 'train.optimizer.momentum' for optimizer "
                  "'adam'"))
      << d.format();
  EXPECT_TRUE(has(d, "variant 'b': unknown key 'train.optimizer.momentum' for optimizer 'sgd'"))
      << d.format();
  // Every variant's problem is said once, as it is.
  EXPECT_TRUE(has(d, "unknown key 'train.bogus' for section 'train'")) << d.format();
  EXPECT_FALSE(has(d, "variants 'a', 'b', 'c'")) << d.format();
}

TEST_F(ConfigTest, QuotedNumberIsAString) {
  std::string text = kValid;
  text.replace(text.find("epochs: 2"), 9, "epochs: \"2\"");
  EXPECT_TRUE(has(errors(text), "'train.epochs' must be an integer"));
}

TEST_F(ConfigTest, MissingRequiredKeys) {
  Diagnostics d = errors("dataset: {name: toy-data}\n");
  EXPECT_TRUE(has(d, "missing required key 'model.name'"));
  EXPECT_TRUE(has(d, "known models: toy"));
  EXPECT_TRUE(has(d, "missing required key 'dataset.root'"));
}

TEST_F(ConfigTest, UnknownComponentNameListsTheKnownOnes) {
  std::string text = kValid;
  text.replace(text.find("name: toy\n"), 9, "name: tyo");
  Diagnostics d = errors(text);
  EXPECT_TRUE(has(d, "unknown model 'tyo' (did you mean 'toy'?)"));
}

// Validation asks what a component can do (its registration says), never its name.
TEST_F(ConfigTest, ResolvedComponentsCarryTheirCapabilities) {
  Experiment e = load(std::string(kValid) + "  strategy: ddp\n  devices: 4\n");
  EXPECT_TRUE(e.runs[0].strategy.capabilities.multi_process);
  EXPECT_TRUE(e.runs[0].optimizer.capabilities.steps_on_device);
  e = load(kValid, {"train.optimizer.name=sgd"});
  EXPECT_FALSE(e.runs[0].strategy.capabilities.multi_process);
  EXPECT_FALSE(e.runs[0].optimizer.capabilities.steps_on_device);
  // A multi-process strategy is not captured in a CUDA graph.
  std::string graphs =
      std::string(kValid) + "  compile: cuda-graphs\n  strategy: ddp\n  devices: 2\n";
  graphs.replace(graphs.find("accelerator: cpu"), 16, "accelerator: cuda");
  EXPECT_TRUE(has(errors(graphs), "strategy ddp is not captured"));
  EXPECT_TRUE(has(errors(std::string(kValid) + "  precision: 16-mixd\n"),
                  "unknown precision '16-mixd' (did you mean '16-mixed'?)"));
}

TEST_F(ConfigTest, SeveralDevicesNeedAMultiDeviceStrategy) {
  EXPECT_TRUE(has(errors(std::string(kValid) + "  devices: 4\n"),
                  "strategy 'single' trains on one device"));
}

// runtime.compile: cuda-graphs refuses, with the fix, what a captured step cannot hold.
TEST_F(ConfigTest, CudaGraphsRefuseWhatCannotBeCaptured) {
  const std::string graphs = std::string(kValid) + "  compile: cuda-graphs\n";
  EXPECT_TRUE(has(errors(graphs), "cuda-graphs needs runtime.accelerator: cuda (or auto)"));
  std::string on_cuda = graphs;
  on_cuda.replace(on_cuda.find("accelerator: cpu"), 16, "accelerator: cuda");
  EXPECT_TRUE(load(on_cuda).runs.size() ==
              1u);  // the fused adam's steps and learning rate stay on the device
  EXPECT_TRUE(has(errors(on_cuda, {"train.grad_accum=2"}), "set train.grad_accum: 1"));
  EXPECT_EQ(load(on_cuda, {"train.clip_grad_norm=1.0"}).runs.size(),
            1u);  // clipping stays on the device
  EXPECT_TRUE(has(errors(on_cuda, {"train.optimizer.name=sgd"}), "needs the fused adam or adamw"));
  // Micro-batches are captured within the step: a number, or auto (settled by the eager warm-up
  // steps before capture).
  EXPECT_EQ(load(on_cuda, {"train.micro_batch_size=auto"}).runs.size(), 1u);
  EXPECT_EQ(load(on_cuda, {"train.micro_batch_size=2", "train.batch_size=8"}).runs.size(), 1u);
  EXPECT_TRUE(has(errors(std::string(kValid) + "  compile: cuda-graph\n"),
                  "cuda-graphs"));  // a typo lists the choices
}

// runtime.sync_debug watches CUDA's host synchronisations: meaningless on a CPU-only run.
TEST_F(ConfigTest, SyncDebugNeedsCuda) {
  EXPECT_TRUE(has(errors(kValid, {"runtime.sync_debug=error"}),
                  "set runtime.sync_debug: off or runtime.accelerator: cuda"));
  EXPECT_EQ(load(kValid, {"runtime.sync_debug=error", "runtime.accelerator=auto"}).runs.size(), 1u);
  EXPECT_TRUE(has(errors(kValid, {"runtime.sync_debug=always"}), "sync_debug"));
  // With fp16's loss scaler, only an optimizer that steps on the device skips an overflowed step
  // without reading the flag on the host.
  const std::vector<std::string> fp16 = {"runtime.sync_debug=error", "runtime.accelerator=auto",
                                         "runtime.precision=16-mixed"};
  EXPECT_EQ(load(kValid, fp16).runs.size(), 1u);  // adam: fused
  std::vector<std::string> with_sgd = fp16;
  with_sgd.push_back("train.optimizer.name=sgd");
  EXPECT_TRUE(has(errors(kValid, with_sgd), "optimizer sgd reads the loss scaler's overflow flag"));
  // A mistake in the optimizer's own options is that mistake alone (its capabilities are unknown).
  std::vector<std::string> bad_adam = fp16;
  bad_adam.push_back("train.optimizer.betas=0.9");
  Diagnostics only_betas = errors(kValid, bad_adam);
  EXPECT_EQ(only_betas.size(), 1u);
  EXPECT_TRUE(has(only_betas, "betas"));
  with_sgd.back() = "runtime.sync_debug=warn";
  with_sgd.push_back("train.optimizer.name=sgd");
  EXPECT_EQ(load(kValid, with_sgd).runs.size(), 1u);  // warn shows each synchronisation instead
}

// train.micro_batch_size: a number of samples up to the batch, or auto on one process or under a
// strategy whose ranks can agree on it (ddp, zero2; not fsdp).
TEST_F(ConfigTest, MicroBatchSizesAreNumbersUpToTheBatchOrAutoWhereRanksCanAgree) {
  EXPECT_EQ(load(kValid, {"train.micro_batch_size=auto"}).runs.size(), 1u);
  EXPECT_EQ(load(kValid, {"train.micro_batch_size=4", "train.batch_size=16"}).runs.size(), 1u);
  EXPECT_TRUE(has(errors(kValid, {"train.micro_batch_size=half"}),
                  "micro_batch_size 'half' is neither a number of samples ≥ 1 nor auto"));
  EXPECT_TRUE(has(errors(kValid, {"train.micro_batch_size=0"}), "neither a number"));
  EXPECT_TRUE(has(errors(kValid, {"train.micro_batch_size=32", "train.batch_size=16"}),
                  "'train.micro_batch_size' 32 is more than train.batch_size 16"));
  EXPECT_EQ(
      load(kValid, {"train.micro_batch_size=auto", "runtime.strategy=ddp", "runtime.devices=2"})
          .runs.size(),
      1u);
  EXPECT_TRUE(has(
      errors(kValid, {"train.micro_batch_size=auto", "runtime.strategy=fsdp", "runtime.devices=2"}),
      "under strategy fsdp a rank that runs out mid-forward would leave the others waiting"));
  EXPECT_EQ(load(kValid, {"train.micro_batch_size=4", "runtime.strategy=ddp", "runtime.devices=2"})
                .runs.size(),
            1u);
}

// A typo below a known key is named whole, with the guess from its own level.
TEST_F(ConfigTest, UnknownNestedKeysAreNamedWhereTheyDiverge) {
  Diagnostics nested = errors(kValid, {"train.early_stop.patiance=3"});
  EXPECT_TRUE(has(nested,
                  "unknown key 'train.early_stop.patiance' for section 'train' (did you "
                  "mean 'early_stop.patience'?)"));
  EXPECT_TRUE(has(errors(kValid, {"train.early_stop=3"}),
                  "'train.early_stop' takes a mapping of metric, patience, min_delta"));
  EXPECT_TRUE(has(errors(kValid, {"train.epcohs=3"}), "(did you mean 'epochs'?)"));
  EXPECT_TRUE(has(errors(kValid, {"train.early_stop_patience=3"}),
                  "(did you mean 'early_stop.patience'?)"));
  EXPECT_TRUE(has(errors(kValid, {"train.=3"}), "unknown key 'train.'"));
}

// `train: {epochs: 2}` and `train.epochs: 3` in one mapping: one would silently win.
TEST_F(ConfigTest, AKeyWrittenNestedAndDottedInOneMappingIsAnError) {
  Diagnostics d = errors(std::string(kValid) + "train.epochs: 3\n");
  EXPECT_TRUE(has(d, "'train.epochs' is also written as 'train.epochs' at"));
  EXPECT_TRUE(has(errors(std::string(kValid) + "train.optimizer: {name: sgd}\n"),
                  "'train.optimizer.name' is also written as 'train.optimizer.name'"));
  // Other keys of the same section, and a merge's keys overridden by the map's own, are fine.
  EXPECT_EQ(load(std::string(kValid) + "train.seed: 3\n").runs.size(), 1u);
  EXPECT_EQ(load(std::string(kValid) + R"(sweep:
  variants:
    - {name: a, set: &base {train.epochs: 1}}
    - {name: b, set: {<<: *base, train.epochs: 3}}
)")
                .runs.size(),
            2u);
}

TEST_F(ConfigTest, YamlSyntaxErrorNamesTheLine) {
  Diagnostics d = errors("model:\n  name: toy\n  width: [1, 2\n");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d.items()[0].message.find("YAML syntax error"), std::string::npos);
  EXPECT_GT(d.items()[0].origin.line, 0);
  // yaml-cpp does not say when a tab indents a line: the message does.
  Diagnostics tabs = errors("model:\n  name: toy\ntrain:\n\tepochs: 2\n");
  ASSERT_EQ(tabs.size(), 1u);
  EXPECT_NE(tabs.items()[0].message.find("line 4 indents with a tab, which YAML does not allow"),
            std::string::npos)
      << tabs.items()[0].message;
}

// Swapping back to the component an option was written for makes it that component's own again
// (a model's weights among them); a section that names no component has its default's.
TEST(LayeringTest, CarriedOptionsFollowTheComponentTheyWereWrittenFor) {
  auto layer = [](std::vector<std::pair<std::string, std::string>> entries) {
    ConfigTree tree;
    for (const auto& [key, value] : entries) tree.set(key, {YAML::Node(value), {}, {}});
    return tree;
  };
  LayeredConfig config{layer({{"model.name", "a"}, {"model.weights", "a.safetensors"}})};
  merge_layer(config, layer({{"model.name", "b"}}));
  EXPECT_EQ(config.carried, (CarriedOptions{{"model.weights", "a"}}));
  merge_layer(config, layer({{"model.name", "a"}}));
  EXPECT_TRUE(config.carried.empty());
  LayeredConfig unnamed{layer({{"train.optimizer.lr", "0.01"}})};
  merge_layer(unnamed, layer({{"train.optimizer.name", "sgd"}}));
  EXPECT_EQ(unnamed.carried, (CarriedOptions{{"train.optimizer.lr", "adam"}}));
}

// `{root: ${DATA}/x}`: yaml-cpp's "end of map flow not found" gains what to write instead.
TEST_F(ConfigTest, AVariableInAFlowMappingSaysToQuoteIt) {
  std::string text = kValid;
  text.replace(text.find("  root: /data\n"), 14, "  root: /data\n  extra: {path: ${HOME}/x}\n");
  const Diagnostics d = errors(text);
  EXPECT_TRUE(has(d, "quote the value (root: \"${VAR}/data\")")) << d.format();
}

TEST_F(ConfigTest, MissingAndUnreadableFiles) {
  try {
    load_experiment((dir.path() / "absent.yaml").string(), {}, registry);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.yaml': no such file"), std::string::npos);
  }
  try {
    load_experiment(dir.path().string(), {}, registry);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not a readable file"), std::string::npos);
  }
}

TEST_F(ConfigTest, NonMappingFileIsRejected) {
  EXPECT_TRUE(has(errors("- a\n- b\n"), "must be a mapping"));
}

TEST_F(ConfigTest, ExtendsLayersParentThenChild) {
  dir.write("base/common.yaml", std::string(kValid) + "report: {title: from base}\n");
  Experiment e =
      load("extends: base/common.yaml\nname: child\nmodel: {width: 32}\ntrain: {batch_size: 4}\n");
  EXPECT_EQ(e.name, "child");
  EXPECT_EQ(e.runs[0].model.name, "toy");                                 // inherited
  EXPECT_EQ(e.runs[0].model.options.find("width")->node.Scalar(), "32");  // overridden
  EXPECT_EQ(e.runs[0].train.epochs, 2);                                   // inherited
  EXPECT_EQ(e.runs[0].train.batch_size, 4);
  EXPECT_EQ(e.report.title, "from base");
}

TEST_F(ConfigTest, ErrorsInAnExtendedFileNameThatFile) {
  std::string base = kValid;
  base.replace(base.find("epochs: 2"), 9, "epochs: -1");
  std::string base_path = dir.write("base.yaml", base);
  Diagnostics d = errors("extends: base.yaml\n");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.items()[0].origin.file, base_path);
  EXPECT_EQ(d.items()[0].origin.line, 9);
}

TEST_F(ConfigTest, ExtendsCycleAndMissingParent) {
  dir.write("a.yaml", "extends: b.yaml\n");
  dir.write("b.yaml", "extends: a.yaml\n");
  try {
    load_experiment((dir.path() / "a.yaml").string(), {}, registry);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'extends' forms a cycle"), std::string::npos);
  }
  Diagnostics d = errors("extends: nowhere.yaml\n");
  EXPECT_TRUE(has(d, "nowhere.yaml': no such file"));
  // Where it was looked for: beside the file that names it.
  EXPECT_TRUE(has(d,
                  "(an 'extends' path is found from the folder of the file that names it: "
                  "looked for " +
                      (dir.path() / "nowhere.yaml").lexically_normal().string() + ")"));
  EXPECT_EQ(d.items()[0].origin.line, 1);  // points at the extends line
}

// ${VAR} and ${VAR:-default} in a file's values (a sweep's too) come from the environment; the
// resolved config stores what they expand to; an unset variable without a default is an error at
// its line and column.
TEST_F(ConfigTest, EnvironmentVariablesExpandInValues) {
  setenv("TRAINYARD_TEST_ROOT", "/mnt/shapes", 1);
  setenv("TRAINYARD_TEST_EMPTY", "", 1);
  unsetenv("TRAINYARD_TEST_UNSET");
  const std::string text = R"(name: demo
model: {name: toy, width: "${TRAINYARD_TEST_UNSET:-24}"}
dataset: {name: toy-data, root: "${TRAINYARD_TEST_ROOT}/train"}
train: {epochs: "${TRAINYARD_TEST_EMPTY:-3}", optimizer: {name: adam, lr: 0.01}}
runtime: {accelerator: cpu}
sweep:
  variants:
    - name: other
      set: {dataset.root: "${TRAINYARD_TEST_ROOT}/other"}
)";
  Experiment e = load(text);
  ASSERT_EQ(e.runs.size(), 1u);
  EXPECT_EQ(e.runs[0].dataset.options.find("root")->node.Scalar(), "/mnt/shapes/other");
  EXPECT_EQ(e.runs[0].train.epochs, 3);
  EXPECT_NE(e.runs[0].config_yaml.find("root: /mnt/shapes/other"), std::string::npos)
      << e.runs[0].config_yaml;
  Experiment base = load(
      std::string(kValid).replace(std::string(kValid).find("/data"), 5, "${TRAINYARD_TEST_ROOT}"));
  EXPECT_EQ(base.runs[0].dataset.options.find("root")->node.Scalar(), "/mnt/shapes");
  Experiment literal =
      load(std::string(kValid).replace(std::string(kValid).find("/data"), 5, "/data/$${x}"));
  EXPECT_EQ(literal.runs[0].dataset.options.find("root")->node.Scalar(), "/data/${x}");

  Diagnostics d = errors(std::string(kValid).replace(std::string(kValid).find("/data"), 5,
                                                     "${TRAINYARD_TEST_UNSET}/x"));
  ASSERT_TRUE(has(d, "environment variable 'TRAINYARD_TEST_UNSET' is not set")) << d.format();
  EXPECT_NE(d.format().find("exp.yaml:7:9: error:"), std::string::npos) << d.format();
  EXPECT_TRUE(
      has(errors(std::string(kValid).replace(std::string(kValid).find("/data"), 5, "${1BAD}")),
          "'${1BAD}' is not an environment variable"));
  EXPECT_TRUE(
      has(errors(std::string(kValid).replace(std::string(kValid).find("/data"), 5, "${OPEN")),
          "without its '}'"));
}

TEST_F(ConfigTest, SetOverridesWinAndNameThemselvesInErrors) {
  Experiment e =
      load(kValid, {"train.epochs=5", "model.act=gelu", "train.optimizer={name: sgd, lr: 0.5}"});
  EXPECT_EQ(e.runs[0].train.epochs, 5);
  EXPECT_EQ(e.runs[0].model.options.find("act")->node.Scalar(), "gelu");
  EXPECT_EQ(e.runs[0].optimizer.name, "sgd");
  Diagnostics d = errors(kValid, {"train.epochs=-1", "train.bogus=1", "justakey"});
  EXPECT_TRUE(has(d, "'train.epochs' must be ≥ 0, got -1"));
  EXPECT_TRUE(has(d, "unknown key 'train.bogus'"));
  EXPECT_TRUE(has(d, "an override must look like key=value"));
  EXPECT_NE(d.format().find("--set train.epochs=-1: error:"), std::string::npos);
}

// A layer that names another component keeps the options the file set that the new one declares
// (Lightning's CLI keeps the init_args a new class_path accepts) and drops the others, each with a
// note naming it, its value and where it was written.
TEST_F(ConfigTest, SwappingAComponentKeepsWhatStillAppliesAndSaysWhatItDrops) {
  std::string text = kValid;
  text.replace(text.find("{name: adam, lr: 0.01}"), 22,
               "{name: adamw, lr: 0.01, weight_decay: 0.1}");
  text += R"(sweep:
  variants:
    - name: adamw
    - name: adam
      set: {train.optimizer.name: adam}
)";
  Experiment e = load(text);
  ASSERT_EQ(e.runs.size(), 2u);
  const RunSpec& adam = e.runs[1];
  EXPECT_EQ(adam.optimizer.name, "adam");
  EXPECT_EQ(adam.optimizer.options.find("lr")->node.Scalar(), "0.01");  // the file's, not 0.1
  EXPECT_EQ(adam.optimizer.options.find("weight_decay"), nullptr);
  // Both are said: what is kept (its value from the file) and what is dropped.
  ASSERT_EQ(e.notes.size(), 2u);
  EXPECT_NE(e.notes[0].find("variant 'adam': train.optimizer.lr: 0.01 (written for adamw at "),
            std::string::npos)
      << e.notes[0];
  EXPECT_NE(e.notes[0].find(") is kept: optimizer 'adam' declares it"), std::string::npos)
      << e.notes[0];
  EXPECT_NE(
      e.notes[1].find("variant 'adam': train.optimizer.weight_decay: 0.1 (written for adamw at "),
      std::string::npos)
      << e.notes[1];
  EXPECT_NE(e.notes[1].find("exp.yaml:10:"), std::string::npos) << e.notes[1];
  EXPECT_NE(e.notes[1].find("is dropped: optimizer 'adam' has no option 'weight_decay'"),
            std::string::npos)
      << e.notes[1];
  EXPECT_EQ(e.runs[0].optimizer.options.find("weight_decay")->node.Scalar(), "0.1");

  // --set naming another component carries the file's options too.
  e = load(kValid, {"train.optimizer.name=sgd"});
  EXPECT_EQ(e.runs[0].optimizer.name, "sgd");
  EXPECT_EQ(e.runs[0].optimizer.options.find("lr")->node.Scalar(), "0.01");
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_NE(e.notes[0].find("is kept: optimizer 'sgd' declares it"), std::string::npos);
  // Named with options of its own, the section is written afresh: nothing is carried, no note.
  e = load(text, {"train.optimizer={name: adam, lr: 0.2}"});
  EXPECT_EQ(e.runs[0].optimizer.name, "adam");
  EXPECT_EQ(e.runs[0].optimizer.options.find("lr")->node.Scalar(), "0.2");
  EXPECT_TRUE(e.notes.empty());
  // An option written beside the new name is the new component's own: a typo is still an error.
  EXPECT_TRUE(
      has(errors(kValid, {"train.optimizer={name: adamw, weight_decai: 0.1}"}), "weight_decai"));
}

TEST_F(ConfigTest, ComponentShorthand) {
  std::string text = kValid;
  text.replace(text.find("train:\n"), 7, "train:\n  optimizer: sgd\n");
  text.replace(text.find("  optimizer: {name: adam, lr: 0.01}\n"), 36, "");
  EXPECT_EQ(load(text).runs[0].optimizer.name, "sgd");
}

const char* const kSweep = R"(
sweep:
  variants:
    - name: fp32
    - name: bf16
      set: {runtime.precision: bf16-mixed}
  grid:
    train.batch_size: [8, 16]
    model.width: [4, 8]
report:
  baseline: fp32/batch_size=8/width=4
)";

TEST_F(ConfigTest, SweepIsVariantsTimesGrid) {
  Experiment e = load(std::string(kValid) + kSweep);
  ASSERT_EQ(e.runs.size(), 8u);
  EXPECT_EQ(e.runs[0].variant, "fp32/batch_size=8/width=4");
  EXPECT_EQ(e.runs[7].variant, "bf16/batch_size=16/width=8");
  EXPECT_EQ(e.runs[0].runtime.precision, "32-true");
  EXPECT_EQ(e.runs[7].runtime.precision, "bf16-mixed");
  EXPECT_EQ(e.runs[7].train.batch_size, 16);
  EXPECT_EQ(e.runs[7].model.options.find("width")->node.Scalar(), "8");
  std::set<std::string> hashes;
  for (const auto& run : e.runs) hashes.insert(run.config_hash);
  EXPECT_EQ(hashes.size(), 8u);
}

TEST_F(ConfigTest, CommandLineWinsOverTheVariant) {
  Experiment e = load(std::string(kValid) + kSweep, {"runtime.precision=32-true"});
  for (const auto& run : e.runs) EXPECT_EQ(run.runtime.precision, "32-true");
}

TEST_F(ConfigTest, SameConfigSameHash) {
  EXPECT_EQ(load(kValid).runs[0].config_hash, load(kValid).runs[0].config_hash);
  EXPECT_NE(load(kValid).runs[0].config_hash, load(kValid, {"train.seed=1"}).runs[0].config_hash);
  // A logger changes no figure: a run trained without one is the same run with one.
  const RunSpec logged = load(kValid, {"runtime.loggers=[tensorboard]"}).runs[0];
  EXPECT_EQ(logged.runtime.loggers, std::vector<std::string>{"tensorboard"});
  EXPECT_EQ(logged.config_hash, load(kValid).runs[0].config_hash);
  EXPECT_TRUE(has(errors(kValid, {"runtime.loggers=[wandb]"}), "tensorboard"));
}

TEST_F(ConfigTest, BadSweeps) {
  Diagnostics d = errors(std::string(kValid) + R"(
sweep:
  variants:
    - name: a
    - name: a
      sett: {train.epochs: 1}
    - set: {train.epochs: 1}
    - name: c
      set: {train.epochs: -1}
  grid:
    train.seed: 3
report:
  baseline: b
)");
  EXPECT_TRUE(has(d, "duplicate sweep variant name 'a'"));
  EXPECT_TRUE(has(d, "unknown key 'sett' in a sweep variant (did you mean 'set'?)"));
  EXPECT_TRUE(has(d, "sweep variant without a 'name'"));
  EXPECT_TRUE(has(d, "'sweep.grid.train.seed' must be a non-empty list"));
  EXPECT_TRUE(has(d, "'train.epochs' must be ≥ 0, got -1"));
  EXPECT_TRUE(has(d, "'report.baseline' names no variant: 'b'"));
}

// A misspelt section in a variant or a grid would otherwise give runs that silently differ in
// nothing.
TEST_F(ConfigTest, SweepKeysOutsideTheRunSectionsAreReported) {
  Diagnostics d = errors(std::string(kValid) + R"(
sweep:
  variants:
    - {name: a, set: {trian.epochs: 3}}
  grid:
    foo.bar: [1, 2]
)");
  EXPECT_TRUE(has(d, "unknown key 'trian' for a sweep variant's 'set' (did you mean 'train'?)"));
  EXPECT_TRUE(has(d, "unknown key 'foo' for 'sweep.grid'"));
}

// YAML merge keys, which yaml-cpp leaves as ordinary keys: the merged maps' keys come in, the
// map's own win, and of a list of merged maps the first wins.
TEST_F(ConfigTest, YamlMergeKeysMergeAndTheMapsOwnKeysWin) {
  Experiment e = load(std::string(kValid) + R"(
sweep:
  variants:
    - name: a
      set: &common {train.epochs: 3, train.seed: 5}
    - name: b
      set:
        <<: *common
        train.epochs: 4
    - name: c
      set:
        <<: [{train.seed: 6}, *common]
)");
  ASSERT_EQ(e.runs.size(), 3u);
  EXPECT_EQ(e.runs[1].train.epochs, 4);
  EXPECT_EQ(e.runs[1].train.seed, 5);
  EXPECT_EQ(e.runs[2].train.epochs, 3);
  EXPECT_EQ(e.runs[2].train.seed, 6);

  std::string text = kValid;
  text.replace(text.find("train:\n  epochs: 2"), 18,
               "defaults: &d {epochs: 7, seed: 8}\ntrain:\n  <<: *d\n  epochs: 2");
  EXPECT_TRUE(has(errors(text), "unknown key 'defaults'"));  // anchors live in known sections
  text = kValid;
  text.replace(text.find("train:\n  epochs: 2"), 18,
               "train:\n  <<: {epochs: 7, seed: 8}\n  epochs: 2");
  EXPECT_EQ(load(text).runs[0].train.seed, 8);
  EXPECT_EQ(load(text).runs[0].train.epochs, 2);
  // A quoted "<<" is an ordinary key.
  EXPECT_TRUE(
      has(errors(std::string(kValid) +
                 "sweep:\n  variants:\n    - {name: a, set: {\"<<\": {train.epochs: 5}}}\n"),
          "unknown key '<<'"));
}

TEST_F(ConfigTest, ReportMetricsMustBeKnown) {
  Diagnostics d =
      errors(std::string(kValid) + "report: {metrics: [train_seconds, test_accuracy]}\n");
  EXPECT_TRUE(has(d, "unknown value 'test_accuracy'"));
}

TEST_F(ConfigTest, ResolvedConfigReadsBackToTheSameRun) {
  Experiment e = load(std::string(kValid) + kSweep);
  RunSpec again = parse_resolved_run(e.runs[5].config_yaml, e.runs[5].variant, registry);
  EXPECT_EQ(again.config_hash, e.runs[5].config_hash);
  EXPECT_EQ(again.train.batch_size, e.runs[5].train.batch_size);
}

// YAML forbids a key twice in one mapping; yaml-cpp would keep the later one without a word.
TEST_F(ConfigTest, AKeyGivenTwiceInOneMappingIsAnError) {
  std::string text = kValid;
  text.replace(text.find("  epochs: 2\n"), 12, "  epochs: 2\n  epochs: 5\n");
  Diagnostics d = errors(text);
  ASSERT_EQ(d.size(), 1u) << d.format();
  EXPECT_EQ(d.items()[0].origin.line, 10);
  EXPECT_TRUE(has(d, "key 'epochs' is given twice in this mapping (first at "));
  EXPECT_TRUE(has(errors(std::string(kValid) + "sweep:\n  variants:\n    - {name: a, name: b}\n"),
                  "key 'name' is given twice"));
}

TEST_F(ConfigTest, OverridesMayHaveSpacesAroundTheEqualsSign) {
  EXPECT_EQ(load(kValid, {"train.epochs = 5"}).runs[0].train.epochs, 5);
  EXPECT_EQ(load(kValid, {" train.epochs=6 "}).runs[0].train.epochs, 6);
  EXPECT_TRUE(has(errors(kValid, {" = 5"}), "an override must look like key=value"));
}

// Every bad entry of a list is reported, each where it is written.
TEST_F(ConfigTest, EveryBadEntryOfAListIsReported) {
  Diagnostics d = errors(std::string(kValid) + "report:\n  metrics: [test_acc, speed, memory]\n");
  ASSERT_EQ(d.size(), 2u) << d.format();
  EXPECT_TRUE(has(d, "unknown value 'speed'"));
  EXPECT_TRUE(has(d, "unknown value 'memory'"));
  EXPECT_NE(d.items()[0].origin.column, d.items()[1].origin.column);
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// What a file may ask for is bounded, each limit with its message.
class ConfigLimitsTest : public ::testing::Test {
 protected:
  std::string load_error(const std::string& text, int64_t max_runs = kDefaultMaxRuns) {
    try {
      load_experiment(dir.write("exp.yaml", text), {}, registry, max_runs);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  testing::TempDir dir;
  Registry registry = testing::fake_registry();
  const std::string base = "model: {name: toy}\ndataset: {name: toy-data, root: /data}\n";
};

TEST_F(ConfigLimitsTest, ASweepOfMoreRunsThanTheLimitIsRefusedBeforeItExpands) {
  // 10^4 combinations x 10 repeats: counted, never expanded.
  const std::string big =
      base +
      "sweep:\n  repeats: 10\n  grid:\n    model.width: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
      "    train.epochs: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
      "    train.seed: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
      "    train.batch_size: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  const std::string error = load_error(big);
  EXPECT_NE(error.find("expands to 100000 runs"), std::string::npos) << error;
  EXPECT_NE(error.find("--max-runs"), std::string::npos) << error;
  EXPECT_NE(error.find("exp.yaml:6"), std::string::npos) << error;  // the grid's first key
  EXPECT_EQ(load_error(base + "sweep: {grid: {model.width: [1, 2, 3]}}\n", 3), "");
  EXPECT_NE(load_error(base + "sweep: {grid: {model.width: [1, 2, 3]}}\n", 2).find("3 runs"),
            std::string::npos);
}

TEST_F(ConfigLimitsTest, DeepNestingAndAliasBombsAreRefused) {
  std::string deep = base + "description: ";
  for (int i = 0; i < 40; ++i) deep += "[";
  for (int i = 0; i < 40; ++i) deep += "]";
  EXPECT_NE(load_error(deep + "\n").find("nests deeper than 32 levels"), std::string::npos);
  // Each level repeats the one before it ten times: 10^9 values from a dozen lines.
  std::string bomb = base + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i)
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + [&] {
      std::string refs;
      for (int r = 0; r < 10; ++r) refs += (r ? ", *a" : "*a") + std::to_string(i - 1);
      return refs;
    }() + "]\n";
  EXPECT_NE(load_error(bomb).find("more than 1000000 values"), std::string::npos);
}

TEST_F(ConfigLimitsTest, AHugeFileIsRefusedUnread) {
  std::string huge = base + "description: |\n";
  while (huge.size() < (5u << 20)) huge += "  " + std::string(200, 'x') + "\n";
  const std::string error = load_error(huge);
  EXPECT_NE(error.find("an experiment file may have at most 4194304"), std::string::npos)
      << error.substr(0, 300);
}

TEST_F(ConfigLimitsTest, ADeviceThatNeverEndsIsReadNoFurtherThanTheLimit) {
  // /dev/zero's size is 0 and its zeros never end: what is read is counted, not the size stat()
  // gives. The fuzzer found it as `extends: /dev/full`.
  const std::string error = load_error(base + "extends: /dev/zero\n");
  EXPECT_NE(error.find("'/dev/zero' goes on past 4194304 bytes"), std::string::npos) << error;
  std::filesystem::create_symlink("/dev/zero", dir.path() / "zero.yaml");
  try {
    load_experiment((dir.path() / "zero.yaml").string(), {}, registry, kDefaultMaxRuns);
    ADD_FAILURE() << "a file that never ends was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("zero.yaml' goes on past"), std::string::npos) << e.what();
  }
  // A pipe that ends (`trainyard validate <(envsubst < exp.yaml)`) is read as a file is.
  const std::string fifo = (dir.path() / "piped.yaml").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << base << "train: {epochs: 7}\n"; });
  const Experiment piped = load_experiment(fifo, {}, registry, kDefaultMaxRuns);
  writer.join();
  ASSERT_EQ(piped.runs.size(), 1u);
  EXPECT_EQ(piped.runs[0].train.epochs, 7);
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

// A resolved config as a run recorded it before fingerprints existed (the dry run of commit
// 678ed0a printed it, with its hash): its legacy hash is still that hash, so old databases keep
// their runs; by content, its data's path no longer counts and its fingerprint does.
TEST(IdentityTest, RunsRecordedBeforeFingerprintsKeepTheirIdentity) {
  std::ifstream in(std::string(TRAINYARD_SOURCE_DIR) +
                   "/tests/fixtures/resolved_before_fingerprints.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto resolved = [&](const std::string& root, const std::string& content) {
    std::string yaml = text;
    yaml.replace(yaml.find("/tmp/golden/cifar"), 17, root);
    if (!content.empty())
      yaml += "fingerprints: [{key: dataset.root, content: '" + content + "'}]\n";
    ConfigTree tree;
    flatten_into(tree, YAML::Load(yaml), "fixture");
    return tree;
  };
  const ConfigTree before = resolved("/tmp/golden/cifar", "");
  EXPECT_EQ(legacy_identity_hash(before), "8cb00ea70807123d");
  EXPECT_EQ(run_identity_hash(before), "8cb00ea70807123d");  // names no fingerprint

  const ConfigTree here = resolved("/tmp/golden/cifar", "fd85 (6 files, 369 kB)");
  EXPECT_EQ(legacy_identity_hash(here), "8cb00ea70807123d");
  EXPECT_NE(run_identity_hash(here), "8cb00ea70807123d");
  EXPECT_EQ(run_identity_hash(resolved("/data/elsewhere", "fd85 (6 files, 369 kB)")),
            run_identity_hash(here));
  EXPECT_NE(run_identity_hash(resolved("/tmp/golden/cifar", "0bad (6 files, 369 kB)")),
            run_identity_hash(here));

  // Those runs kept the best val_acc epoch, the earlier one on a tie: no train.monitor does that
  // now (a tie keeps the later epoch), so neither setting is theirs; with train.checkpoint: last
  // nothing is monitored, and the key does not count.
  auto with = [](ConfigTree tree, const std::string& key, const std::string& value) {
    tree.set(key, {YAML::Node(value), Origin{}, Origin{}});
    return tree;
  };
  EXPECT_NE(run_identity_hash(with(before, "train.monitor", "val_acc")), "8cb00ea70807123d");
  EXPECT_NE(run_identity_hash(with(before, "train.monitor", "val_loss")), "8cb00ea70807123d");
  const ConfigTree last = with(before, "train.checkpoint", "last");
  EXPECT_EQ(run_identity_hash(with(last, "train.monitor", "val_loss")), run_identity_hash(last));
  EXPECT_EQ(run_identity_hash(with(last, "train.monitor", "val_acc")), run_identity_hash(last));
}

}  // namespace
}  // namespace trainyard
