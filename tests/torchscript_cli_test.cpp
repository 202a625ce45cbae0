// model: torchscript end to end, as a user meets it: the scripted networks of
// tests/fixtures/make_torchscript_fixture.py named in experiment files and trained by the
// executable under every precision and strategy, continued bit for bit after a kill, their weights
// saved under the module's names and loaded back; and what cannot train refused at validation.
#include <array>
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "components/weights/safetensors.h"
#include "db/store.h"
#include "tests/cli_support.h"

namespace trainyard::testing {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return source("tests/fixtures/" + name); }

// The attention classifier (no dropout, no BatchNorm) on synthetic tokens of its vocabulary.
std::string text_experiment(const std::string& variants) {
  return fmt::format(R"(name: scripted-text
model: {{name: torchscript, file: {}, input: tokens, max_positions: 16}}
dataset: {{name: synthetic-text, vocab_size: 64, min_length: 4, max_length: 16, num_classes: 3,
          train_size: 1024, val_size: 32, test_size: 32}}
train: {{epochs: 2, batch_size: 16, optimizer: {{name: adamw, lr: 1.0e-2}}, log_every: 1000}}
runtime: {{accelerator: cpu, threads: 1}}
{})",
                     fixture("torchscript_text.pt"), variants);
}

// The CNN (BatchNorm, dropout) on synthetic 8x8 images of 4 classes.
std::string cnn_experiment(const std::string& name, const std::string& rest,
                           const std::string& model_options = "") {
  return fmt::format(R"(name: {}
model: {{name: torchscript, file: {}, image_size: 8{}}}
dataset: {{name: synthetic-images, num_classes: 4, image_size: 8, train_size: 768, val_size: 32,
          test_size: 32, noise: 0.3}}
runtime: {{accelerator: cpu, threads: 1}}
{})",
                     name, fixture("torchscript_cnn.pt"), model_options, rest);
}

class TorchScriptCliTest : public CliTest {};

// ddp, zero2 and fsdp on 2 ranks with half the batch each train the scripted module to one
// process's losses; every precision trains it; fsdp holds it as one unit.
TEST_F(TorchScriptCliTest, TrainsUnderEveryStrategyAsOneProcessAndUnderEveryPrecision) {
  const std::string file = dir.write("text.yaml", text_experiment(R"(sweep:
  variants:
    - name: single
    - {name: ddp, set: {runtime.strategy: ddp, runtime.devices: 2, train.batch_size: 8}}
    - {name: zero2, set: {runtime.strategy: zero2, runtime.devices: 2, train.batch_size: 8}}
    - {name: fsdp, set: {runtime.strategy: fsdp, runtime.devices: 2, train.batch_size: 8}}
    - {name: bf16-mixed, set: {runtime.precision: bf16-mixed}}
    - {name: 16-mixed, set: {runtime.precision: 16-mixed}}
    - {name: bf16-true, set: {runtime.precision: bf16-true}}
    - {name: untrained, set: {train.optimizer.lr: 1.0e-30}}
)"));
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("8 completed"), std::string::npos) << run.output;
  Store store(db());
  const auto runs = store.runs("scripted-text");
  ASSERT_EQ(runs.size(), 8u);
  const auto single = store.final_metrics(runs[0].id);
  const auto single_epochs = store.epoch_metrics(runs[0].id);
  for (size_t i = 1; i < 4; ++i) {
    SCOPED_TRACE(runs[i].variant);
    const auto m = store.final_metrics(runs[i].id);
    EXPECT_EQ(m.at("steps"), single.at("steps"));
    EXPECT_NEAR(m.at("test_loss"), single.at("test_loss"), 1e-4);
    EXPECT_NEAR(store.epoch_metrics(runs[i].id)[1].values.at("train_loss"),
                single_epochs[1].values.at("train_loss"), 1e-4);
  }
  EXPECT_EQ(store.attributes(runs[3].id).at("fsdp_units").rfind("one unit", 0), 0u);
  // Lower precisions: each computed in its dtype (observed in a training step), close to fp32's
  // test loss and not equal to it.
  const std::array<const char*, 3> dtypes = {"BFloat16", "Half", "BFloat16"};
  for (size_t i = 4; i < 7; ++i) {
    SCOPED_TRACE(runs[i].variant);
    EXPECT_EQ(store.attributes(runs[i].id).at("forward_dtype"), dtypes[i - 4]);
    const double loss = store.final_metrics(runs[i].id).at("test_loss");
    EXPECT_NE(loss, single.at("test_loss"));
    EXPECT_NEAR(loss, single.at("test_loss"), 0.05);
  }
  EXPECT_EQ(store.attributes(runs[0].id).at("forward_dtype"), "Float");
  // Every run learned: its test loss is under half the untrained module's (about ln 3).
  const double untrained = store.final_metrics(runs[7].id).at("test_loss");
  for (size_t i = 0; i < 7; ++i)
    EXPECT_LT(store.final_metrics(runs[i].id).at("test_loss"), 0.5 * untrained) << runs[i].variant;
}

// The CNN's trained weights are saved under the module's own names (BatchNorm statistics float32
// under bf16-mixed), and load back as model.weights: testing them alone gives the same accuracy.
TEST_F(TorchScriptCliTest, SavesWeightsUnderItsOwnNamesThatLoadBack) {
  const std::string file = dir.write(
      "cnn.yaml",
      cnn_experiment("scripted-cnn", R"(train: {epochs: 2, batch_size: 16, save_weights: true,
        optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}
sweep:
  variants:
    - name: fp32
    - {name: bf16-mixed, set: {runtime.precision: bf16-mixed}}
)"));
  Result run = trainyard("run " + file + " --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Store store(db());
  const auto runs = store.runs("scripted-cnn");
  ASSERT_EQ(runs.size(), 2u);
  std::string fp32_weights;
  for (const auto& r : runs) {
    SCOPED_TRACE(r.variant);
    const std::string path =
        fs::path(r.environment.log_path).replace_extension(".safetensors").string();
    SafetensorsFile weights(path);
    for (const char* name : {"conv1.weight", "bn1.running_mean", "bn2.running_var", "head.bias"})
      ASSERT_NE(weights.find(name), nullptr) << name;
    EXPECT_EQ(weights.find("bn1.running_mean")->dtype, SafetensorsDtype::F32);
    if (r.variant == "fp32") fp32_weights = path;
  }
  const std::string again = dir.write(
      "again.yaml", cnn_experiment("scripted-cnn-test", "train: {epochs: 0, batch_size: 16}\n",
                                   ", weights: " + fp32_weights));
  Result test = trainyard("run " + again + " --db " + db());
  ASSERT_EQ(test.exit_code, 0) << test.output;
  EXPECT_EQ(store.final_metrics(store.runs("scripted-cnn-test").at(0).id).at("test_acc"),
            store.final_metrics(runs[0].id).at("test_acc"));
}

// The CNN (BatchNorm buffers, dropout drawn from the generators) with its controller SIGKILLed
// after a mid-epoch checkpoint in epoch 2: the next run continues it, and every figure is the
// undisturbed run's, bit for bit.
TEST_F(TorchScriptCliTest, AKilledRunContinuesBitForBit) {
  const std::string file = dir.write(
      "cnn.yaml", cnn_experiment("scripted-kill",
                                 R"(train: {epochs: 2, batch_size: 8, checkpoint_every_steps: 3,
        optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}
)"));
  expect_a_kill_in_epoch_2_changes_nothing(dir, file, db());
}

// What cannot train is refused before any worker starts, at the line that says it, with the fix;
// nothing is written to the database.
TEST_F(TorchScriptCliTest, ValidationRefusesATracedModuleAndCudaGraphs) {
  const std::string traced =
      dir.write("traced.yaml", fmt::format(R"(name: traced
model: {{name: torchscript, file: {}, image_size: 8}}
dataset: {{name: synthetic-images, num_classes: 4, image_size: 8, train_size: 64}}
runtime: {{accelerator: cpu}}
)",
                                           fixture("torchscript_traced.pt")));
  Result run = trainyard("run " + traced + " --db " + db());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find(traced + ":2:"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("made by torch.jit.trace"), std::string::npos) << run.output;
  EXPECT_FALSE(fs::exists(db()));

  const std::string graphs = dir.write(
      "graphs.yaml",
      cnn_experiment("graphs",
                     R"(train: {epochs: 1, batch_size: 8, optimizer: {name: adam, fused: true}}
)"));
  Result validate = trainyard("validate " + graphs +
                              " --set runtime.accelerator=cuda --set runtime.compile=cuda-graphs");
  EXPECT_EQ(validate.exit_code, 2) << validate.output;
  EXPECT_NE(validate.output.find("runtime.compile: cuda-graphs runs a TorchScript module"),
            std::string::npos)
      << validate.output;
  EXPECT_NE(validate.output.find("use runtime.compile: none with model torchscript"),
            std::string::npos)
      << validate.output;

  // The module's head (4 logits) against 10 classes: the fix is to export it again, whichever way
  // the file says it — not a model.num_classes that the next validation refuses the other way.
  const std::string ten = cnn_experiment("ten", "");
  Result unset =
      trainyard("validate " + dir.write("ten.yaml", ten) + " --set dataset.num_classes=10");
  EXPECT_EQ(unset.exit_code, 2) << unset.output;
  EXPECT_NE(
      unset.output.find("error: model torchscript returns 4 logits per sample (the head of its "
                        "file) but dataset synthetic-images has 10 classes; re-export the "
                        "model with a head of 10 outputs"),
      std::string::npos)
      << unset.output;
  Result set = trainyard("validate " + dir.write("ten.yaml", ten) +
                         " --set dataset.num_classes=10 --set model.num_classes=10");
  EXPECT_EQ(set.exit_code, 2) << set.output;
  EXPECT_NE(set.output.find("returns 4 logits per sample on a trial batch: the head is the "
                            "module's own, so re-export the module with a head of 10 outputs (or, "
                            "if 4 is right, set model.num_classes: 4)"),
            std::string::npos)
      << set.output;
  // Not a path: nothing about where a relative path is looked for.
  EXPECT_EQ(set.output.find("a relative path"), std::string::npos) << set.output;
}

// A real allocation failure inside the interpreter (2^50 bytes) is classed out-of-memory.
TEST_F(TorchScriptCliTest, AnAllocationFailureInTheInterpreterIsOutOfMemory) {
  const std::string file = dir.write("huge.yaml", fmt::format(R"(name: huge
model: {{name: torchscript, file: {}, image_size: 8}}
dataset: {{name: synthetic-images, num_classes: 4, image_size: 8, train_size: 64, val_size: 16,
          test_size: 16}}
train: {{epochs: 1, batch_size: 8}}
runtime: {{accelerator: cpu, threads: 1}}
)",
                                                              fixture("torchscript_huge.pt")));
  Result run = trainyard("run " + file + " --db " + db());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("run failed (out-of-memory)"), std::string::npos) << run.output;
  Store store(db());
  EXPECT_EQ(store.runs("huge").at(0).failure, FailureClass::out_of_memory);
}

// The README's Python examples (experiments/torchscript_cnn.yaml, distilbert_textfile.yaml) train
// from the files examples/python/make_examples.py writes, here stood in for by the fixture CNN,
// tiny PNGs, a CSV written here and the fixture vocabulary (EXAMPLES points the files at them).
TEST_F(TorchScriptCliTest, ThePythonExamplesTrainFromTheirData) {
  const fs::path examples = dir.path() / "examples";
  fs::create_directories(examples);
  fs::copy_file(fixture("torchscript_cnn.pt"), examples / "resnetish.pt");
  fs::copy_file(fixture("vocab.txt"), examples / "vocab.txt");
  // A 2x2 RGB PNG.
  const std::string png(
      "\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x02\x00\x00"
      "\x00\x02\x08\x02\x00\x00\x00\xfd\xd4\x9a\x73\x00\x00\x00\x10\x49\x44\x41\x54\x78\xda"
      "\x63\x38\x21\x27\x07\x44\x0c\x10\x0a\x00\x1f\x26\x04\x11\x4a\x8e\x8d\x20\x00\x00\x00"
      "\x00\x49\x45\x4e\x44\xae\x42\x60\x82",
      73);
  for (const char* split : {"train", "val", "test"})
    for (const char* shape : {"circle", "cross", "square", "triangle"})
      for (int i = 0; i < 8; ++i)
        dir.write(fmt::format("examples/shapes/{}/{}/{}.png", split, shape, i), png);
  std::string csv = "text,label\n";
  for (int i = 0; i < 60; ++i)
    csv += fmt::format("\"the film, {}\",{}\n", i % 3 ? "good" : "bad",
                       std::array{"negative", "neutral", "positive"}[i % 3]);
  dir.write("examples/reviews.csv", csv);
  Result run =
      shell(fmt::format("cd {} && EXAMPLES={} {} run experiments/torchscript_cnn.yaml "
                        "experiments/distilbert_textfile.yaml --db {} --set train.epochs=1",
                        source(""), examples.string(), TRAINYARD_EXE, db()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("4 completed"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace trainyard::testing
