// End to end: the trainyard executable on real experiment files — running, reporting, validating,
// listing — into temporary databases.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/text.h"
#include "db/store.h"
#include "reports/report.h"
#include "tests/cli_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::Result;
using testing::source;
using testing::trainyard;

class CliTest : public testing::CliTest {};

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
  for (const char* text :
       {"Quickstart — ViT on synthetic images (CPU)", "bf16-mixed", "batch-64-adamw-cosine",
        "1.00x", "speedup", "<svg", "LibTorch 2.", "Time to val_acc ≥ 50%", "<th>cost</th>",
        R"(<svg class="pareto")", "<th>val acc</th>"})
    EXPECT_NE(page.find(text), std::string::npos) << text;
  EXPECT_EQ(page.find("<th>val ppl</th>"), std::string::npos);  // a language model's figure
  // Without -o, the answer in the terminal: the summary and each variant's verdict.
  Result answer = trainyard("report --db " + db());
  ASSERT_EQ(answer.exit_code, 0) << answer.output;
  EXPECT_NE(answer.output.find("quickstart: 3 of 3 variants completed"), std::string::npos)
      << answer.output;
  EXPECT_NE(answer.output.find("\n  fp32 — baseline"), std::string::npos) << answer.output;
  EXPECT_NE(answer.output.find("\n  bf16-mixed — one run each: spread unknown"), std::string::npos)
      << answer.output;
  EXPECT_NE(answer.output.find("the whole report: trainyard report -o report.html"),
            std::string::npos);

  Result again = trainyard("run " + source("experiments/quickstart.yaml") + " --db " + db() +
                           " --set train.epochs=3");
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.output.find("0 completed, 3 already completed"), std::string::npos)
      << again.output;

  Result listing = trainyard("runs --db " + db());
  EXPECT_EQ(listing.exit_code, 0);
  EXPECT_NE(listing.output.find("batch-64-adamw-cosine"), std::string::npos);
}

// The trial of a new user: a smoke test with --set, the real run, a scratch database in the same
// folder, a colleague's file with the same experiment name. Afterwards no run's file was
// overwritten, and the report shows exactly the runs the file describes, the smoke test apart.
TEST_F(CliTest, ATrialOfSmokeTestsScratchDatabasesAndAColleaguesFileLosesNothing) {
  const std::string trial = dir.write("trial.yaml", R"(
name: trial
model: {name: vit, image_size: 16, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 16, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4}
train: {epochs: 2, batch_size: 16, save_weights: true}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: fp32
    - name: bf16
      set: {runtime.precision: bf16-mixed}
)");
  const std::string scratch = (dir.path() / "runs" / "scratch.db").string();
  ASSERT_EQ(trainyard("run " + trial + " --db " + db() + " --set train.epochs=1").exit_code, 0);
  ASSERT_EQ(trainyard("run " + trial + " --db " + db()).exit_code, 0);
  ASSERT_EQ(trainyard("run " + trial + " --db " + scratch + " --set train.epochs=1").exit_code, 0);

  // A colleague's file that says the same name is refused, naming both files; nothing is written.
  const std::string colleague = dir.write("colleague.yaml", "extends: trial.yaml\nname: trial\n");
  Result clash = trainyard("run " + colleague + " --db " + db());
  EXPECT_EQ(clash.exit_code, 2) << clash.output;
  EXPECT_NE(clash.output.find("experiment name 'trial' is already taken"), std::string::npos)
      << clash.output;
  EXPECT_NE(clash.output.find("colleague.yaml"), std::string::npos) << clash.output;
  EXPECT_NE(clash.output.find(fs::absolute(trial).lexically_normal().string()), std::string::npos)
      << clash.output;

  // Six runs, ids 1-4 in one database and 1-2 in the other, six sets of files: each log is its
  // own run's (it names its id and config hash), and each run saved its own weights.
  std::set<std::string> logs;
  for (const std::string& path : {db(), scratch}) {
    Store store(path);
    for (const auto& run : store.runs("trial")) {
      SCOPED_TRACE(path + " run " + std::to_string(run.id));
      EXPECT_EQ(run.status, RunStatus::completed);
      EXPECT_TRUE(logs.insert(run.environment.log_path).second) << run.environment.log_path;
      const std::string log = read_file(run.environment.log_path);
      EXPECT_NE(log.find(fmt::format("run {} of experiment 'trial', variant '{}' (config {})",
                                     run.id, run.variant, run.config_hash)),
                std::string::npos)
          << log.substr(0, 300);
      EXPECT_TRUE(fs::exists(store.attributes(run.id).at("weights_path")));
      EXPECT_EQ(store.params(run.id).at("train.epochs"),
                run.config_yaml.find("epochs: 1") != std::string::npos ? "1" : "2");
    }
  }
  EXPECT_EQ(logs.size(), 6u);
  EXPECT_EQ(Store(db()).runs("trial").size(), 4u);  // the refused file added nothing

  // The report's rows are the runs of the file as it is (2 epochs: runs 3 and 4); the smoke test's
  // runs are listed apart with the key in which they differ.
  const fs::path csv = dir.path() / "report.csv", html = dir.path() / "report.html";
  ASSERT_EQ(trainyard("report --db " + db() + " -o " + csv.string()).exit_code, 0);
  const std::string table = read_file(csv);
  EXPECT_NE(table.find("trial,fp32,3,completed"), std::string::npos) << table;
  EXPECT_NE(table.find("trial,bf16,4,completed"), std::string::npos) << table;
  EXPECT_EQ(table.find("trial,fp32,1,"), std::string::npos) << table;
  ASSERT_EQ(trainyard("report --db " + db() + " -o " + html.string()).exit_code, 0);
  const std::string page = read_file(html);
  EXPECT_NE(page.find("Runs of other configurations"), std::string::npos);
  EXPECT_NE(page.find("train.epochs: 1 (the file: 2)"), std::string::npos);

  // `runs` and `report` say the same of an experiment the database does not have.
  Result runs = trainyard("runs --db " + db() + " -e trail");
  Result report = trainyard("report --db " + db() + " -e trail -o " + html.string());
  EXPECT_EQ(runs.exit_code, 2);
  EXPECT_EQ(report.exit_code, 2);
  EXPECT_NE(runs.output.find("no experiment 'trail' in"), std::string::npos) << runs.output;
  EXPECT_NE(runs.output.find("(did you mean 'trial'?)"), std::string::npos) << runs.output;
  EXPECT_EQ(runs.output, report.output);

  // The smoke test's runs removed, with their files: first said, then (with --yes) done.
  Store store(db());
  const RunRecord smoke = store.runs("trial")[0];
  const std::string weights = store.attributes(smoke.id).at("weights_path");
  Result plan = trainyard("rm --db " + db() + " -e trial --id 1 --id 2");
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("2 runs and 8 files would be removed"), std::string::npos)
      << plan.output;
  EXPECT_TRUE(fs::exists(smoke.environment.log_path));
  EXPECT_EQ(store.runs("trial").size(), 4u);
  Result removed = trainyard("rm --db " + db() + " -e trial --id 1 --id 2 --yes");
  EXPECT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_NE(removed.output.find("removed 2 runs and 8 files"), std::string::npos) << removed.output;
  EXPECT_FALSE(fs::exists(smoke.environment.log_path));
  EXPECT_FALSE(fs::exists(weights));
  const auto left = store.runs("trial");
  ASSERT_EQ(left.size(), 2u);
  for (const auto& run : left) EXPECT_TRUE(fs::exists(run.environment.log_path));
  EXPECT_TRUE(store.params(smoke.id).empty());
  EXPECT_EQ(trainyard("rm --db " + db() + " --status bogus").exit_code, 2);
}

TEST_F(CliTest, BadConfigExitsTwoAndWritesNothing) {
  std::string file = dir.write("bad.yaml", "extends: " + source("experiments/quickstart.yaml") +
                                               "\ntrain:\n  epcohs: 2\n  batch_size: -1\n");
  Result run = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("bad.yaml:3:3: error: unknown key 'train.epcohs'"), std::string::npos)
      << run.output;
  // The third variant sets its own batch size: the other two are named.
  EXPECT_NE(run.output.find("bad.yaml:4:15: error: variants 'fp32', 'bf16-mixed': "
                            "'train.batch_size' must be ≥ 1, got -1"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("2 errors"), std::string::npos);
  EXPECT_EQ(run.output.find("error: " + file), std::string::npos)
      << run.output;  // one "error:" each
  EXPECT_FALSE(fs::exists(db()));
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
}

// Everything that can be known without training is reported by validate, all at once, where it
// is written: model against dataset (classes, vocabulary, sequence length), missing data, a
// missing vocabulary, missing weights.
// Lightning's names mean what they mean there (accelerator gpu, precision 16 with Lightning's
// note, devices auto counted on this machine), or are refused with the name to write here; a
// misspelt key and a bad value in one section are both reported.
TEST_F(CliTest, LightningsNamesAreUnderstood) {
  const std::string model =
      "model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: "
      "32, num_classes: 4}\ndataset: {name: synthetic-images, image_size: 8, num_classes: 4}\n";
  const std::string good =
      dir.write("good.yaml",
                "name: good\n" + model +
                    "runtime: {accelerator: gpu, precision: 16, devices: auto, strategy: ddp}\n");
  Result dry = testing::shell("CUDA_VISIBLE_DEVICES=0,1 " + std::string(TRAINYARD_EXE) + " run " +
                              good + " --dry-run --verbose --db " + db());
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  for (const char* resolved : {"accelerator: cuda", "precision: 16-mixed", "devices: 2"})
    EXPECT_NE(dry.output.find(resolved), std::string::npos) << resolved << "\n" << dry.output;
  EXPECT_NE(dry.output.find("good.yaml:4:40: note: `precision=16` is supported for historical "
                            "reasons but its usage is discouraged. Please set your precision to "
                            "16-mixed instead!"),
            std::string::npos)
      << dry.output;
  EXPECT_NE(dry.output.find("runtime.devices: auto is 2 on this machine"), std::string::npos);
  // Without GPUs, devices: auto on cuda cannot be counted: refused with what to write.
  Result none =
      testing::shell("CUDA_VISIBLE_DEVICES= " + std::string(TRAINYARD_EXE) + " validate " + good);
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("write how many (runtime.devices: 4)"), std::string::npos)
      << none.output;

  const std::string bad = dir.write(
      "bad.yaml", "name: bad\n" + model + R"(train: {lr: 0.1, scheduler: {name: cosine, warmup: 3}}
runtime: {precision: 64, strategy: deepspeed_stage_2}
)");
  Result refused = trainyard("validate " + bad);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  for (const char* message :
       {"bad.yaml:4:9: error: unknown key 'train.lr' (did you mean 'train.optimizer.lr'?)",
        "unknown key 'train.scheduler.warmup' for scheduler 'cosine' (did you mean "
        "'warmup_steps'?)",
        "'runtime.precision': 64 is not offered here",
        "unknown strategy 'deepspeed_stage_2' (did you mean 'zero2'? (DeepSpeed stage 2"})
    EXPECT_NE(refused.output.find(message), std::string::npos) << message << "\n" << refused.output;
  // Said once, not again as an unknown precision.
  Result set = trainyard("validate " + source("experiments/quickstart.yaml") +
                         " --set runtime.precision=64");
  EXPECT_EQ(set.exit_code, 2) << set.output;
  EXPECT_NE(set.output.find("'runtime.precision': 64 is not offered here"), std::string::npos)
      << set.output;
  EXPECT_EQ(set.output.find("unknown precision"), std::string::npos) << set.output;
  EXPECT_NE(set.output.find("\n1 error"), std::string::npos) << set.output;
  const std::string both =
      dir.write("both.yaml", "name: both\n" + model + "train: {epochs: -1, lerning_rate: 3}\n");
  Result two = trainyard("validate " + both);
  EXPECT_NE(two.output.find("'train.epochs' must be ≥ 0, got -1"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("unknown key 'train.lerning_rate'"), std::string::npos) << two.output;
}

// A weights file is read at validation (its header; the tensors are not read): a PyTorch .bin and
// a truncated safetensors file are refused with the loader's messages, exit 2, before any worker.
TEST_F(CliTest, ValidationReadsTheWeightsFilesHeader) {
  const std::string model =
      "model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: "
      "32, num_classes: 4, weights: ";
  const std::string rest = "}\ndataset: {name: synthetic-images, image_size: 8, num_classes: 4}\n";
  // What torch.save writes: a zip archive ("PK\3\4"), whose first 8 bytes read as a huge length.
  const std::string bin =
      dir.write("pytorch_model.bin", std::string("PK\3\4\0\0\0\0", 8) + "data.pkl");
  Result zip = trainyard("validate " + dir.write("bin.yaml", "name: bin\n" + model + bin + rest));
  EXPECT_EQ(zip.exit_code, 2) << zip.output;
  EXPECT_NE(zip.output.find("bin.yaml:2:119: error: model.weights: "), std::string::npos)
      << zip.output;
  EXPECT_NE(zip.output.find("a PyTorch .bin/.pt file must be converted first"), std::string::npos)
      << zip.output;
  // A header that says 200 bytes, in a file of 20.
  const std::string cut =
      dir.write("cut.safetensors", std::string("\xc8\0\0\0\0\0\0\0", 8) + "{\"w\": {\"dty");
  Result truncated =
      trainyard("validate " + dir.write("cut.yaml", "name: cut\n" + model + cut + rest));
  EXPECT_EQ(truncated.exit_code, 2) << truncated.output;
  EXPECT_NE(truncated.output.find("the file is truncated"), std::string::npos) << truncated.output;
}

// A data root that is not there is one error, at dataset.root — not one per split.
TEST_F(CliTest, AMissingDataRootIsOneError) {
  const std::string file = dir.write("gone.yaml", R"(name: gone
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: imagefolder, root: /nowhere/photos}
)");
  Result result = trainyard("validate " + file);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(
      result.output.find("gone.yaml:3:36: error: imagefolder: no such folder /nowhere/photos"),
      std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("\n1 error"), std::string::npos) << result.output;
}

// A relative path that is not there says where it was looked for — the folder trainyard runs in,
// not the experiment file's — and, when the file's folder has it, what to write instead.
TEST_F(CliTest, ARelativePathThatIsNotThereNamesWhereItWasLookedFor) {
  fs::create_directories(dir.path() / "project" / "photos" / "train");
  fs::create_directories(dir.path() / "elsewhere");
  const std::string file = dir.write("project/photos.yaml", R"(name: photos
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32}
dataset: {name: imagefolder, root: photos, val_fraction: 0.1}
)");
  const Result result = testing::shell("cd " + (dir.path() / "elsewhere").string() + " && " +
                                       TRAINYARD_EXE + " validate " + file);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find(fmt::format(
                "photos.yaml:3:36: error: imagefolder: no such folder photos; dataset.root must "
                "hold a train/<class>/ folder of images (a relative path is found from the folder "
                "trainyard runs in, {}); the experiment file's folder has it: write '{}'",
                (dir.path() / "elsewhere").string(), (dir.path() / "project" / "photos").string())),
            std::string::npos)
      << result.output;
}

// A model that cannot read its data is refused at validation, before anything is written: one
// sample through its forward, with both shapes and the options that set them.
TEST_F(CliTest, AModelThatCannotReadItsDataIsRefusedBeforeTheNight) {
  const std::string file = dir.write("shapes.yaml", R"(name: shapes
model: {name: vit, image_size: 32, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 32,
        num_classes: 4}
dataset: {name: synthetic-images, image_size: 16, num_classes: 4, train_size: 64, val_size: 32,
          test_size: 32}
train: {epochs: 1, batch_size: 32}
runtime: {accelerator: cpu}
)");
  for (const std::string command : {"validate " + file, "run " + file + " --db " + db()}) {
    const Result result = trainyard(command);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find(
                  "shapes.yaml:4:17: error: model 'vit' cannot read dataset 'synthetic-images': on "
                  "a sample of Float [1, 3, 16, 16], its forward failed: vit expects images [B, 3, "
                  "32, 32], got [1, 3, 16, 16] (set by model.image_size: 32, model.patch_size: 8, "
                  "dataset.image_size: 16); make them agree"),
              std::string::npos)
        << result.output;
  }
  EXPECT_FALSE(fs::exists(db()));
  // A TorchScript module that takes images, given text: its forward fails at validation too.
  const std::string scripted =
      dir.write("scripted.yaml", fmt::format(R"(name: scripted
model: {{name: torchscript, file: {}, image_size: 8}}
dataset: {{name: synthetic-text, vocab_size: 64, max_length: 16, num_classes: 4}}
)",
                                             source("tests/fixtures/torchscript_cnn.pt")));
  const Result text = trainyard("validate " + scripted);
  EXPECT_EQ(text.exit_code, 2) << text.output;
  EXPECT_NE(text.output.find("error: model 'torchscript' cannot read dataset 'synthetic-text': on "
                             "a sample of Long [1, 16], its forward failed: "),
            std::string::npos)
      << text.output;
  // Where they agree, validation says ok.
  const Result agreed = trainyard("validate " + file + " --set dataset.image_size=32");
  EXPECT_EQ(agreed.exit_code, 0) << agreed.output;
}

// Two files of one batch that give one name: validate refuses them, as run does.
TEST_F(CliTest, ValidateRefusesTwoFilesOfOneName) {
  const std::string text = read_file(source("experiments/quickstart.yaml"));
  const std::string a = dir.write("a.yaml", text), b = dir.write("b.yaml", text);
  const Result validate = trainyard("validate " + a + " " + b);
  EXPECT_EQ(validate.exit_code, 2) << validate.output;
  EXPECT_NE(validate.output.find("error: " + b + ": experiment name 'quickstart' is also " + a +
                                 "'s; their runs would mix in one report"),
            std::string::npos)
      << validate.output;
}

TEST_F(CliTest, ValidateCatchesEveryStaticMistakeAtOnce) {
  const std::string file = dir.write("mistakes.yaml", R"(
name: mistakes
model: {name: vit, image_size: 16, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 16, num_classes: 10, weights: /no/such/vit.safetensors}
dataset: {name: synthetic-images, num_classes: 4}
runtime: {accelerator: cpu}
sweep:
  variants:
    - name: images
    - name: text
      set:
        model: {name: distilbert, layers: 1, dim: 16, heads: 2, hidden_dim: 16, max_positions: 64, vocab_size: 100, num_classes: 2}
        dataset: {name: synthetic-text, vocab_size: 1000, max_length: 128}
    - name: imdb
      set:
        model: {name: distilbert, num_classes: 2}
        dataset: {name: imdb, root: /no/such/aclImdb, vocab: /no/such/vocab.txt}
)");
  Result validate = trainyard("validate " + file);
  EXPECT_EQ(validate.exit_code, 2);
  for (const char* expected :
       {"mistakes.yaml:3:108: error: variant 'images': model.num_classes is 10 but dataset "
        "synthetic-images has 4 classes; set model.num_classes: 4",
        "mistakes.yaml:3:121: error: variant 'images': model.weights: no such file "
        "'/no/such/vit.safetensors'",
        "error: model.vocab_size is 100 but the dataset's vocabulary has 1000 tokens; set "
        "model.vocab_size: 1000",
        "error: dataset.max_length 128 is longer than the model's max_positions 64",
        "error: imdb: no such folder '/no/such/aclImdb'",
        "error: imdb: cannot read the vocabulary '/no/such/vocab.txt'", "6 errors"})
    EXPECT_NE(validate.output.find(expected), std::string::npos) << expected << "\n"
                                                                 << validate.output;
  EXPECT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 2);
  EXPECT_FALSE(fs::exists(db()));
  // A vocabulary that leads to a device (its lines would never end) is no vocabulary.
  const Result device = trainyard("validate " + dir.write("device.yaml", R"(name: device
model: {name: distilbert, num_classes: 2}
dataset: {name: imdb, root: /no/such/aclImdb, vocab: /dev/zero}
runtime: {accelerator: cpu}
)"));
  EXPECT_EQ(device.exit_code, 2);
  EXPECT_NE(device.output.find("error: imdb: cannot read the vocabulary '/dev/zero'"),
            std::string::npos)
      << device.output;
}

// CUDA graphs capture one batch shape: dynamic padding is refused at validation, with the fix.
TEST_F(CliTest, CudaGraphsRefuseDynamicPadding) {
  const std::string file = dir.write("graphs.yaml", R"(
name: graphs
model: {name: distilbert, layers: 1, dim: 16, heads: 2, hidden_dim: 16, max_positions: 64, vocab_size: 100, num_classes: 2}
dataset: {name: synthetic-text, vocab_size: 100, max_length: 64, padding: dynamic}
train: {optimizer: {name: adamw}}
runtime: {accelerator: cuda, compile: cuda-graphs}
)");
  Result dynamic = trainyard("validate " + file);
  EXPECT_EQ(dynamic.exit_code, 2);
  EXPECT_NE(dynamic.output.find("cuda-graphs captures one batch shape; dataset synthetic-text "
                                "pads each batch to its longest sequence (padding: dynamic): set "
                                "dataset.padding: max_length"),
            std::string::npos)
      << dynamic.output;
  EXPECT_EQ(trainyard("validate " + file + " --set dataset.padding=max_length").exit_code, 0);
}

TEST_F(CliTest, DryRunPrintsTheResolvedRunsAndTouchesNothing) {
  Result run = trainyard("run " + source("experiments/quickstart.yaml") +
                         " --dry-run --set train.epochs=1 --db " + db());
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.output.find("--- run 2/3: bf16-mixed"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("epochs: 1"), std::string::npos);
  EXPECT_FALSE(fs::exists(db()));
}

// A dry run shows each run by its differences from the baseline (whole with --verbose) and marks
// the runs the database already holds as completed.
TEST_F(CliTest, DryRunShowsDifferencesFromTheBaselineAndWhatAlreadyCompleted) {
  const std::string file = dir.write("tiny.yaml", R"(
name: tiny
model: {name: vit, image_size: 16, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 16, num_classes: 4}
dataset: {name: synthetic-images, train_size: 32, val_size: 16, test_size: 16, num_classes: 4}
train: {epochs: 1, batch_size: 16}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: fp32
    - name: bf16
      set: {runtime.precision: bf16-mixed}
)");
  Result before = trainyard("run " + file + " --dry-run --db " + db());
  EXPECT_EQ(before.exit_code, 0) << before.output;
  EXPECT_NE(before.output.find("(baseline: fp32)"), std::string::npos) << before.output;
  EXPECT_NE(before.output.find("  runtime.precision: bf16-mixed (baseline: 32-true)\n"),
            std::string::npos)
      << before.output;
  EXPECT_EQ(before.output.find("already completed"), std::string::npos);
  EXPECT_FALSE(fs::exists(db()));
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  Result after = trainyard("run " + file + " --dry-run --db " + db());
  EXPECT_NE(after.output.find("the baseline [already completed as run 1: skipped unless --force]"),
            std::string::npos)
      << after.output;
  EXPECT_NE(after.output.find("[already completed as run 2: skipped unless --force]"),
            std::string::npos);
  Result other = trainyard("run " + file + " --dry-run --set train.epochs=2 --db " + db());
  EXPECT_EQ(other.output.find("already completed"), std::string::npos) << other.output;
  Result verbose = trainyard("run " + file + " --dry-run --verbose --db " + db());
  EXPECT_NE(verbose.output.find("precision: bf16-mixed\n"), std::string::npos) << verbose.output;
  // Another strategy differs in its name, in the options set away from its defaults, and in the
  // defaults that now apply (backend, broadcast_buffers, ...), each marked as ddp's.
  std::string ddp_file = file;
  ddp_file.replace(ddp_file.find("tiny.yaml"), 9, "tiny_ddp.yaml");
  std::string text = read_file(file);
  text.replace(text.find("set: {runtime.precision: bf16-mixed}"), 36,
               "set: {runtime.strategy: {name: ddp, bucket_mb: 50}, runtime.devices: 2}");
  dir.write("tiny_ddp.yaml", text);
  Result ddp = trainyard("run " + ddp_file + " --dry-run");
  EXPECT_EQ(ddp.exit_code, 0) << ddp.output;
  for (const char* line : {"  runtime.devices: 2 (baseline: 1)\n",
                           "  runtime.strategy.backend: auto, ddp's default (baseline: not set)\n",
                           "  runtime.strategy.bucket_mb: 50.0 (baseline: not set)\n",
                           "  runtime.strategy.name: ddp (baseline: single)\n"})
    EXPECT_NE(ddp.output.find(line), std::string::npos) << line << ddp.output;
}

// A variant that swaps the optimizer keeps the file's learning rate (adamw's own default is 20x
// smaller) and drops, with a note from validate and the dry run, what adamw does not declare.
TEST_F(CliTest, SwappingTheOptimizerKeepsTheFilesLearningRateAndSaysWhatItDrops) {
  const std::string file = dir.write("swap.yaml", R"(
name: swap
model: {name: vit, image_size: 16, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 16, num_classes: 4}
dataset: {name: synthetic-images, train_size: 32, val_size: 16, test_size: 16, num_classes: 4}
train:
  epochs: 1
  batch_size: 16
  optimizer: {name: sgd, lr: 1.0e-3, momentum: 0.9}
runtime: {accelerator: cpu, threads: 1}
sweep:
  variants:
    - name: sgd
    - name: adamw
      set: {train.optimizer.name: adamw}
)");
  const std::string note = "variant 'adamw': train.optimizer.momentum: 0.9 (written for sgd at " +
                           file + ":8:48) is dropped: optimizer 'adamw' has no option 'momentum'";
  Result validate = trainyard("validate " + file);
  EXPECT_EQ(validate.exit_code, 0) << validate.output;
  EXPECT_NE(validate.output.find(note), std::string::npos) << validate.output;
  Result dry = trainyard("run " + file + " --dry-run --verbose");
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find(note), std::string::npos) << dry.output;
  const size_t adamw = dry.output.find("--- run 2/2: adamw");
  ASSERT_NE(adamw, std::string::npos) << dry.output;
  EXPECT_NE(dry.output.find("lr: 0.001", adamw), std::string::npos) << dry.output;
  EXPECT_EQ(dry.output.find("momentum", adamw), std::string::npos) << dry.output;

  // The dry run's differences are the effective settings, defaults included, and what follows
  // from them: on two ddp ranks with adamw, the global batch doubles, an epoch has half the steps,
  // and adamw's weight decay (its default) differs from sgd's; the kept learning rate does not.
  std::string text = read_file(file);
  text.replace(text.find("set: {train.optimizer.name: adamw}"), 34,
               "set: {train.optimizer.name: adamw, runtime.strategy: ddp, runtime.devices: 2, "
               "runtime.precision: bf16-mixed}");
  const Result ddp = trainyard("run " + dir.write("swap_ddp.yaml", text) + " --dry-run");
  EXPECT_EQ(ddp.exit_code, 0) << ddp.output;
  for (const char* line :
       {"  derived.global_batch: 32 (baseline: 16)\n",
        "  derived.optimizer_steps_per_epoch: 1 (baseline: 2)\n",
        "  runtime.devices: 2 (baseline: 1)\n", "  runtime.strategy.name: ddp (baseline: single)\n",
        "  train.optimizer.name: adamw (baseline: sgd)\n",
        "  train.optimizer.weight_decay: 0.01 (baseline: 0.0)\n",
        "  derived.compute_dtype: bfloat16 (baseline: float32)\n"})
    EXPECT_NE(ddp.output.find(line), std::string::npos) << line << ddp.output;
  EXPECT_EQ(ddp.output.find("  train.optimizer.lr:"), std::string::npos) << ddp.output;
  EXPECT_EQ(ddp.output.find("  derived.weights_dtype:"), std::string::npos) << ddp.output;

  // One list in the dry run and in the report's "differs from the baseline" column: what the swap
  // dropped (sgd's momentum) and the new optimizer's defaults that now apply (adamw's eps).
  Result plain = trainyard("run " + file + " --dry-run");
  std::vector<std::string> lines;
  const size_t from = plain.output.find("--- run 2/2: adamw");
  ASSERT_NE(from, std::string::npos) << plain.output;
  std::istringstream after(plain.output.substr(plain.output.find('\n', from) + 1));
  for (std::string line; std::getline(after, line) && line.rfind("  ", 0) == 0;)
    if (line.find(": ") != std::string::npos && line.find("(baseline: ") != std::string::npos)
      lines.push_back(line.substr(2));
  for (const char* expected : {"train.optimizer.momentum: not set (baseline: 0.9)",
                               "train.optimizer.name: adamw (baseline: sgd)"})
    EXPECT_NE(std::find(lines.begin(), lines.end(), expected), lines.end()) << expected << "\n"
                                                                            << plain.output;
  EXPECT_NE(plain.output.find("  train.optimizer.eps: "), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find(", adamw's default (baseline: not set)"), std::string::npos)
      << plain.output;
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  const std::string page = (dir.path() / "swap.html").string();
  ASSERT_EQ(trainyard("report --db " + db() + " -o " + page).exit_code, 0);
  const std::string html = read_file(page);
  std::vector<std::string> cells;  // the table's column, the baseline's row first
  for (size_t at = html.find("<td class=\"differs\">"); at != std::string::npos;
       at = html.find("<td class=\"differs\">", at + 1))
    cells.push_back(html.substr(at, html.find("</td>", at) - at));
  std::vector<std::string> escaped;
  for (const auto& line : lines) escaped.push_back(html_escape(line));
  EXPECT_EQ(cells, (std::vector<std::string>{"<td class=\"differs\">(the baseline)",
                                             "<td class=\"differs\">" + join(escaped, "<br>")}));
}

// runtime.threads 0 (the default) asks the machine, not its momentary load: one file run again on
// one machine while other processes keep its CPUs busy chooses the same threads and computes the
// same figures. runtime.threads: idle is the load-adaptive choice, recorded as such.
TEST_F(CliTest, TheSameFileGivesTheSameFiguresWhateverElseRuns) {
  const std::string file = dir.write("threads.yaml", R"(
name: threads
model: {name: vit, image_size: 16, patch_size: 4, depth: 2, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4, image_size: 16}
train: {epochs: 1, batch_size: 16}
runtime: {accelerator: cpu}
)");
  auto figures = [&](const std::string& db) {
    Store store(db);
    const int64_t id = store.runs("threads").at(0).id;
    return std::pair{store.final_metrics(id), store.attributes(id).at("threads")};
  };
  ASSERT_EQ(trainyard("run " + file + " --db " + (dir.path() / "quiet.db").string()).exit_code, 0);
  // Every CPU of this machine kept busy by another process while the second run starts and trains.
  std::vector<pid_t> busy;
  for (int i = 0; i < 2 * static_cast<int>(std::thread::hardware_concurrency()); ++i)
    if (const pid_t pid = fork(); pid == 0) {
      for (volatile uint64_t n = 0;; n = n + 1) {
      }
    } else {
      busy.push_back(pid);
    }
  const Result loaded = trainyard("run " + file + " --db " + (dir.path() / "busy.db").string());
  const Result idle = trainyard("run " + file + " --set runtime.threads=idle --db " +
                                (dir.path() / "idle.db").string());
  for (pid_t pid : busy) kill(pid, SIGKILL);
  for (pid_t pid : busy) waitpid(pid, nullptr, 0);
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  ASSERT_EQ(idle.exit_code, 0) << idle.output;
  const auto [quiet_figures, quiet_threads] = figures((dir.path() / "quiet.db").string());
  const auto [busy_figures, busy_threads] = figures((dir.path() / "busy.db").string());
  EXPECT_EQ(busy_threads, quiet_threads);
  EXPECT_NE(quiet_threads.find("runtime.threads 0: "), std::string::npos) << quiet_threads;
  for (const char* key : {"test_loss", "test_acc", "best_val_acc"})
    EXPECT_EQ(busy_figures.at(key), quiet_figures.at(key)) << key;
  EXPECT_NE(figures((dir.path() / "idle.db").string()).second.find("runtime.threads idle: "),
            std::string::npos);
  // A count of threads below zero, or a word it does not know, is refused with the three forms.
  for (const char* bad : {"-2", "lots"}) {
    const Result refused = trainyard("validate " + file + " --set runtime.threads=" + bad);
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find("0 (every usable CPU"), std::string::npos) << refused.output;
  }
}

// An A/A batch: three variants that differ in nothing but their names, three repeats each, run for
// real in rounds. The report must claim no difference beyond noise. Its tests are wrong together
// at most 5% of the time by design, so a batch that claims one is run once more: this fails when
// both do (at most 0.25% of the time by chance).
TEST_F(CliTest, AnAABatchClaimsNothingBeyondNoise) {
  const std::string file = dir.write("aa.yaml", R"(
name: aa
model: {name: vit, image_size: 16, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 16, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 16, test_size: 16, num_classes: 4, image_size: 16}
train: {epochs: 1, batch_size: 16}
runtime: {accelerator: cpu, threads: 1}
sweep:
  repeats: 3
  variants:
    - name: first
    - name: second
    - name: third
)");
  // Neither faster (the answer) nor slower (a verdict's "× slower (low–high×, ...)") beyond noise.
  auto claims_nothing = [](const std::string& report) {
    return report.find("no variant is faster than first beyond noise") != std::string::npos &&
           report.find("× slower (") == std::string::npos;
  };
  std::string report;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string db = (dir.path() / fmt::format("aa{}.db", attempt)).string();
    const Result run = trainyard("run " + file + " --db " + db);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::string md = (dir.path() / "aa.md").string();
    ASSERT_EQ(trainyard("report --db " + db + " -o " + md).exit_code, 0);
    report = read_file(md);
    ASSERT_NE(report.find("paired by round"), std::string::npos) << report;
    if (claims_nothing(report)) break;
  }
  EXPECT_TRUE(claims_nothing(report)) << report;
  // The report follows the file's report: section as it is now, and --set report.*.
  const std::string again = (dir.path() / "again.md").string();
  ASSERT_EQ(trainyard("report --db " + (dir.path() / "aa0.db").string() +
                      " --set report.baseline=third -o " + again)
                .exit_code,
            0);
  EXPECT_NE(read_file(again).find("- **third** — baseline"), std::string::npos) << read_file(again);
}

// The data and weights as files on disk (the data empty: validation looks for it, it does not read
// it; the weights well-formed: validation reads their header).
std::string fake_study_files(const testing::TempDir& dir) {
  for (const auto& name : testing::kCifar10Files) dir.write("cifar-10-batches-bin/" + name, "");
  for (const char* folder : {"train/pos", "train/neg", "test/pos", "test/neg"})
    fs::create_directories(dir.path() / "aclImdb" / folder);
  testing::write_foreign_weights(dir, "vit_b_16.safetensors");
  testing::write_foreign_weights(dir, "distilbert/model.safetensors");
  dir.write("distilbert/vocab.txt", read_file(source("tests/fixtures/vocab.txt")));
  const std::string d = dir.path().string();
  // The placeholders fit no model: loaded not strictly, which validation does not check.
  return " --set dataset.root=" + d + "/cifar-10-batches-bin --set model.weights=" + d +
         "/vit_b_16.safetensors --set model.strict=false";
}

// Validation reads a weights file's header against the model it would load into: a file another
// model wrote (here: one block fewer) or no model's is refused at model.weights, with what does not
// fit, before anything trains; model.strict: false accepts it, as loading then does.
TEST_F(CliTest, ValidationChecksTheWeightsAgainstTheModel) {
  const std::string file = dir.write("w.yaml", R"(name: w
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 32, val_size: 16, test_size: 16, num_classes: 4}
train: {epochs: 1, batch_size: 16, save_weights: true}
runtime: {accelerator: cpu, threads: 1}
)");
  ASSERT_EQ(trainyard("run " + file + " --db " + db()).exit_code, 0);
  const std::string weights = Store(db()).attributes(Store(db()).runs("w")[0].id)["weights_path"];
  ASSERT_TRUE(fs::exists(weights)) << weights;
  const std::string with = " --set model.weights=" + weights;
  Result fits = trainyard("validate " + file + with +
                          " --set dataset.num_classes=3 --set model.num_classes=3");
  EXPECT_EQ(fits.exit_code, 0) << fits.output;  // another head is initialised afresh
  Result deeper = trainyard("validate " + file + with + " --set model.depth=2");
  EXPECT_EQ(deeper.exit_code, 2) << deeper.output;
  EXPECT_NE(deeper.output.find("--set model.weights=" + weights +
                               ": error: model.weights: weights " + weights +
                               ": the checkpoint does not fit the model; missing from "
                               "the checkpoint: encoder.layers.encoder_layer_1."),
            std::string::npos)
      << deeper.output;
  EXPECT_NE(deeper.output.find("or set model.strict: false to load what fits"), std::string::npos);
  EXPECT_EQ(trainyard("validate " + file + with + " --set model.depth=2 --set model.strict=false")
                .exit_code,
            0);
  const std::string other_db = (dir.path() / "other.db").string();
  Result run = trainyard("run " + file + with + " --set model.depth=2 --db " + other_db);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_FALSE(fs::exists(other_db));  // nothing written
  const std::string foreign = testing::write_foreign_weights(dir, "foreign.safetensors");
  Result none = trainyard("validate " + file + " --set model.weights=" + foreign);
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("not in the model: not_in_the_model.weight"), std::string::npos)
      << none.output;
}

// A run whose loss barely moved is flagged as not learning even where its accuracy is far above
// chance: trained weights fine-tuned at a learning rate that moves nothing. The run that trained
// them is not flagged.
TEST_F(CliTest, ARunWhoseLossBarelyMovedIsFlaggedWhateverItsAccuracy) {
  const std::string file = dir.write("still.yaml", R"(name: still
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 256, val_size: 32, test_size: 256, num_classes: 4,
          noise: 0.3}
train: {epochs: 2, batch_size: 16, log_every: 16, save_weights: true,
        optimizer: {name: adam, lr: 3.0e-3}}
runtime: {accelerator: cpu, threads: 1}
)");
  const Result learned = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(learned.exit_code, 0) << learned.output;
  EXPECT_EQ(learned.output.find("did not learn"), std::string::npos) << learned.output;
  const std::string weights =
      Store(db()).attributes(Store(db()).runs("still")[0].id)["weights_path"];
  const Result still =
      trainyard("run " + file + " --db " + db() + " --set model.weights=" + weights +
                " --set train.optimizer.lr=1.0e-30");
  ASSERT_EQ(still.exit_code, 0) << still.output;
  EXPECT_NE(still.output.find("did not learn: the training loss "), std::string::npos)
      << still.output;
  Store store(db());
  const auto runs = store.runs("still");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_GT(store.final_metrics(runs[1].id).at("test_acc"), 0.5);  // far above chance (25%)
  EXPECT_NE(store.attributes(runs[1].id)["learning"].find("0.0% ("), std::string::npos)
      << store.attributes(runs[1].id)["learning"];
  EXPECT_EQ(store.attributes(runs[0].id).count("learning"), 0u);
}

// As shipped, the reference studies' files name placeholder paths: validation says which, all at
// once. With the files in place they validate, and on a machine without a GPU every run is skipped.
TEST_F(CliTest, ReferenceStudiesValidateAndSkipWhatThisMachineLacks) {
  Result placeholders = trainyard("validate " + source("experiments/vit_cifar10.yaml"));
  EXPECT_EQ(placeholders.exit_code, 2);
  EXPECT_NE(placeholders.output.find("cifar10: no such folder '/path/to/cifar-10-batches-bin'"),
            std::string::npos)
      << placeholders.output;
  EXPECT_NE(placeholders.output.find("model.weights: no such file '/path/to/vit_b_16.safetensors'"),
            std::string::npos);
  const std::string vit_files = fake_study_files(dir), d = dir.path().string();
  const std::string imdb_files = " --set dataset.root=" + d + "/aclImdb --set dataset.vocab=" + d +
                                 "/distilbert/vocab.txt --set model.weights=" + d +
                                 "/distilbert/model.safetensors --set model.strict=false";
  Result vit = trainyard("validate " + source("experiments/vit_cifar10.yaml") + vit_files);
  EXPECT_EQ(vit.exit_code, 0) << vit.output;
  EXPECT_NE(vit.output.find("5 runs"), std::string::npos) << vit.output;
  Result bert = trainyard("validate " + source("experiments/distilbert_imdb.yaml") + imdb_files);
  EXPECT_EQ(bert.exit_code, 0) << bert.output;
  EXPECT_NE(bert.output.find("5 runs"), std::string::npos) << bert.output;
  Result run = trainyard("run " + source("experiments/distilbert_imdb.yaml") + " --db " + db() +
                         " --set runtime.accelerator=cuda" + imdb_files);
  Store store(db());
  auto runs = store.runs("distilbert_imdb");
  ASSERT_EQ(runs.size(), 5u) << run.output;
  if (runs[0].status == RunStatus::skipped) {  // no GPU: every run (fp32 ... 4-GPU fsdp) skipped
    for (const auto& r : runs)
      EXPECT_EQ(r.error, "needs a CUDA device; this machine has none") << r.variant;
    EXPECT_EQ(run.exit_code, 3) << run.output;  // nothing ran, and the batch says so
    EXPECT_NE(run.output.find("nothing ran: every run was skipped"), std::string::npos)
        << run.output;
  }
}

// The benchmarks' experiment files run where device time is scarce: a file that no longer validates
// must fail here, not in the one GPU call of a session.
TEST_F(CliTest, BenchmarkExperimentFilesValidate) {
  // bench/gpu.sh writes a small CIFAR-10 here before sync_check.yaml runs; the same, in the same
  // format (random pixels, 20 images a file), so that validation finds it.
  const fs::path cifar("/tmp/trainyard-bench/cifar-10-batches-bin");
  fs::create_directories(cifar);
  for (const auto& name : testing::kCifar10Files) {
    if (fs::exists(cifar / name)) continue;
    std::ofstream out(cifar / name, std::ios::binary);
    for (int image = 0; image < 20; ++image)
      out << static_cast<char>(image % 10) << std::string(3072, '\x40');
  }
  std::map<std::string, int> runs = {
      {"gpu/vit_throughput.yaml", 12}, {"gpu/distilbert_throughput.yaml", 12},
      {"gpu/sync_check.yaml", 10},     {"gpu/smoke.yaml", 20},
      {"gpu/micro_batch.yaml", 2},     {"gpu/gpt2_throughput.yaml", 4},
      {"gpu/study_vit.yaml", 1},       {"gpu/study_distilbert.yaml", 1}};
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
  EXPECT_NE(strategies_example.output.find("ok — experiment 'strategies_cpu', 4 runs"),
            std::string::npos)
      << strategies_example.output;

  Result list = trainyard("list");
  EXPECT_EQ(list.exit_code, 0);
  for (const char* name :
       {"vit", "cifar10", "synthetic-images", "adamw", "cosine", "bf16-mixed", "single"})
    EXPECT_NE(list.output.find(name), std::string::npos) << name;
  EXPECT_NE(list.output.find("reshard_after_forward"), std::string::npos);  // fsdp's options

  // Every section, with types, defaults and ranges; the metrics with their units.
  for (const char* key : {"section train:", "section runtime:", "section report:", "section sweep:",
                          "sync_debug", "baseline", "grid", "test_acc"})
    EXPECT_NE(list.output.find(key), std::string::npos) << key;
  Result train = trainyard("list train");
  EXPECT_TRUE(std::regex_search(train.output, std::regex("\n +epochs +int +3 +passes over the "
                                                         "training split; 0: only test the given "
                                                         "weights")))
      << train.output;
  // sweep's keys from their option sets: its own, sweep.search's and its schedule's, each with its
  // type, default and rule.
  Result sweep = trainyard("list sweep");
  for (const char* line :
       {"\n +repeats +int +1 .*\\[1 to 1000\\]", "\n +order +string +interleaved .*grouped",
        "\n +search\\.method +string +random .*\\[one of: grid, random, tpe\\]",
        "\n +search\\.trials +int +- ", "\n +search\\.metric +string +val_loss .*val_f1",
        "\n +search\\.confirm_repeats +int +1 ", "\n +search\\.space +map ",
        "\n +search\\.schedule\\.name +string +none .*successive-halving",
        "\n +search\\.schedule\\.grace_epochs +int +1 ",
        "\n +search\\.schedule\\.reduction +int +3 .*\\[2 to 100\\]"})
    EXPECT_TRUE(std::regex_search(sweep.output, std::regex(line))) << line << "\n" << sweep.output;
  Result metrics = trainyard("list metrics");
  EXPECT_NE(metrics.output.find("test_acc"), std::string::npos);
  EXPECT_NE(metrics.output.find("a fraction (0-1)"), std::string::npos);
  EXPECT_NE(metrics.output.find("peak_memory_bytes                bytes"), std::string::npos)
      << metrics.output;
  EXPECT_EQ(trainyard("list modle").exit_code, 2);
  Result strategies = trainyard("list strategies");  // the plural names the kind too
  EXPECT_EQ(strategies.exit_code, 0);
  EXPECT_NE(strategies.output.find("zero2"), std::string::npos);
  EXPECT_NE(trainyard("rnu").output.find("did you mean 'run'"), std::string::npos);
  EXPECT_EQ(trainyard("run --bogus").exit_code, 2);
  EXPECT_EQ(trainyard("--help").exit_code, 0);
  EXPECT_EQ(trainyard("report --db " + db() + " -o x.html").exit_code, 2);  // no database yet
}

// What a new user met first (issue 57): the help describes export with MLflow and prints defaults
// as written (not 0.80000000000000004); tokenize's next step says that `tokens` needs a
// validation file too when it wrote one file; a batch refused before it starts leaves no empty
// database behind.
TEST_F(CliTest, WhatANewUserMetFirstSaysWhatIsTrue) {
  const Result help = trainyard("--help");
  EXPECT_EQ(help.exit_code, 0);
  const size_t line = help.output.find("  export");
  ASSERT_NE(line, std::string::npos) << help.output;
  EXPECT_NE(help.output.substr(line, help.output.find('\n', line) - line).find("MLflow"),
            std::string::npos)
      << help.output;
  for (const char* command : {"run", "validate", "report", "submit", "export", "tokenize", "sample",
                              "status", "runs", "rm", "list"}) {
    const Result usage = trainyard(std::string(command) + " --help");
    EXPECT_EQ(usage.output.find("000000"), std::string::npos) << command << "\n" << usage.output;
  }
  EXPECT_NE(trainyard("sample --help").output.find("--temperature arg (=0.8)"), std::string::npos);

  const std::string text = dir.write("corpus.txt", "a tiny corpus of words, and more words\n");
  const Result tokenized =
      trainyard("tokenize --tokenizer " + source("tests/fixtures/bpe_gpt2.json") + " " + text +
                " -o " + (dir.path() / "val.bin").string());
  ASSERT_EQ(tokenized.exit_code, 0) << tokenized.output;
  EXPECT_NE(tokenized.output.find("next: dataset: {name: tokens, train: TRAIN.bin, val: VAL.bin}"),
            std::string::npos)
      << tokenized.output;
  EXPECT_NE(tokenized.output.find("`tokens` needs both"), std::string::npos) << tokenized.output;

  std::string mlflow = read_file(source("experiments/quickstart.yaml"));
  const std::string file = dir.write("mlflow.yaml", mlflow);
  const Result refused =
      testing::shell("env -u MLFLOW_TRACKING_URI " + std::string(TRAINYARD_EXE) + " run " + file +
                     " --set runtime.loggers=[mlflow] --db " + db());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("MLFLOW_TRACKING_URI is not set"), std::string::npos)
      << refused.output;
  EXPECT_FALSE(std::filesystem::exists(db())) << "an empty database was left behind";
  EXPECT_FALSE(std::filesystem::exists(db() + ".lock"));
}

// A command line's mistakes: exit 2, the fix named, nothing written.
TEST_F(CliTest, CommandLineMistakesNameTheFixAndWriteNothing) {
  const std::string quickstart = source("experiments/quickstart.yaml");
  // --db naming a file that is not a database (here an experiment file): refused, untouched, and
  // no lock file beside it.
  const std::string not_a_db = dir.write("notes.yaml", "name: not a database\n");
  Result wrong_db = trainyard("run " + quickstart + " --db " + not_a_db);
  EXPECT_EQ(wrong_db.exit_code, 2) << wrong_db.output;
  EXPECT_NE(wrong_db.output.find("file is not a database; --db (or $TRAINYARD_DB) names the SQLite "
                                 "file Trainyard records into"),
            std::string::npos)
      << wrong_db.output;
  EXPECT_EQ(read_file(not_a_db), "name: not a database\n");
  EXPECT_FALSE(fs::exists(not_a_db + ".lock"));
  EXPECT_EQ(trainyard("status --db " + not_a_db).exit_code, 2);

  Result zero = trainyard("run " + quickstart + " --db " + db() + " --time-limit 0s");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.output.find("leaves no time to train"), std::string::npos) << zero.output;
  Result verbose = trainyard("run " + quickstart + " --db " + db() + " --verbose");
  EXPECT_EQ(verbose.exit_code, 2);
  EXPECT_NE(verbose.output.find("--verbose goes with --dry-run"), std::string::npos)
      << verbose.output;
  EXPECT_FALSE(fs::exists(db()));

  // rm --status takes what `runs` shows: a status, or how a run failed.
  const fs::path not_a_state = dir.path() / "empty.state";  // a folder, but no training state
  fs::create_directories(not_a_state);
  const std::string failing = dir.write(
      "failing.yaml", "extends: " + quickstart +
                          "\nname: failing\ntrain: {epochs: 1}\ndataset: {train_size: 64}\n"
                          "report: {baseline: ok}\n"
                          "sweep: {variants: [{name: ok}, {name: bad, set: {train.resume_from: " +
                          not_a_state.string() + "}}]}\n");
  EXPECT_EQ(trainyard("run " + failing + " --db " + db()).exit_code, 1);
  Result runs = trainyard("runs --db " + db());
  EXPECT_NE(runs.output.find("bad-input"), std::string::npos) << runs.output;
  Result plan = trainyard("rm --db " + db() + " --status bad-input");
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("failing / bad (failed)"), std::string::npos) << plan.output;
  EXPECT_EQ(plan.output.find("failing / ok"), std::string::npos) << plan.output;
  Result bogus = trainyard("rm --db " + db() + " --status bad-inpt");
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.output.find("or a failure: bad-input"), std::string::npos) << bogus.output;
}

}  // namespace
}  // namespace trainyard
