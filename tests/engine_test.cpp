// The engine on a tiny ViT and synthetic images: it learns, it is deterministic, and its
// bookkeeping (epochs, best checkpoint, gradient accumulation, interrupts) holds.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "components/builtin.h"
#include "components/weights/load_weights.h"
#include "runner/config/experiment.h"
#include "runner/engine/engine.h"
#include "tests/test_support.h"
#include "trainyard/model.h"

namespace trainyard {
namespace {

const char* const kTiny = R"(
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 256, val_size: 64, test_size: 128, num_classes: 4, noise: 0.3}
train:
  epochs: 3
  batch_size: 16
  optimizer: {name: adam, lr: 3.0e-3}
  log_every: 1000
runtime: {accelerator: cpu, threads: 1}
)";

struct Recorder : RunObserver {
  void on_log(const std::string& line) override { lines.push_back(line); }
  void on_epoch(int64_t epoch, const MetricValues& values) override {
    epochs.emplace_back(epoch, values);
  }
  void on_setup(const std::map<std::string, std::string>& values) override {
    for (const auto& [key, value] : values) attributes[key] = value;
  }
  void on_step(int64_t step, const MetricValues& values) override {
    steps.emplace_back(step, values);
  }
  std::vector<std::pair<int64_t, MetricValues>> steps;
  std::vector<std::string> lines;
  std::map<std::string, std::string> attributes;
  std::vector<std::pair<int64_t, MetricValues>> epochs;
};

class EngineTest : public ::testing::Test {
 protected:
  RunSpec spec(const std::vector<std::string>& overrides = {}) {
    return load_experiment(dir.write("tiny.yaml", kTiny), overrides, builtin_registry()).runs.at(0);
  }
  MetricValues train(const RunSpec& run, Recorder& recorder,
                     const std::atomic<bool>* stop = nullptr) {
    return train_run(
        run,
        RunContext{.registry = builtin_registry(), .observer = recorder, .stop_requested = stop});
  }
  testing::TempDir dir;
};

// Every train.log_every optimizer steps a progress line: loss, learning rate, the gradient norm
// (clipped or not), ms per step and samples/s.
TEST_F(EngineTest, ProgressLinesShowTheGradientNormAndMsPerStep) {
  for (const char* clip : {"0", "0.5"}) {
    SCOPED_TRACE(clip);
    Recorder recorder;
    train(
        spec({"train.epochs=1", "train.log_every=4", std::string("train.clip_grad_norm=") + clip}),
        recorder);
    int progress_lines = 0;
    for (const auto& line : recorder.lines) {
      if (line.find(" step ") == std::string::npos || line.find(" loss ") == std::string::npos)
        continue;
      ++progress_lines;
      const size_t norm_at = line.find(" grad norm ");
      ASSERT_NE(norm_at, std::string::npos) << line;
      EXPECT_GT(std::stod(line.substr(norm_at + 11)), 0) << line;
      const size_t ms_at = line.find(" ms/step");
      ASSERT_NE(ms_at, std::string::npos) << line;
      EXPECT_GT(std::stod(line.substr(line.rfind(' ', ms_at - 1) + 1)), 0) << line;
      EXPECT_NE(line.find(" samples/s ETA "), std::string::npos) << line;
    }
    EXPECT_EQ(progress_lines, 4);  // 16 steps, a line every 4
  }
}

// Records by step: the loss at every progress line, and every validation — each epoch's end and,
// with train.val_every_steps, inside epochs — with its own time and the training time so far.
// Validating inside epochs changes nothing the run trains: its losses and test figures are the
// run's without it, bit for bit.
TEST_F(EngineTest, StepsRecordTheLossAndEveryValidationWhichChangesNothingTrained) {
  Recorder plain, validating;
  const MetricValues without = train(spec({"train.log_every=4"}), plain);
  const MetricValues with =
      train(spec({"train.log_every=4", "train.val_every_steps=6"}), validating);
  EXPECT_EQ(with.at("test_loss"), without.at("test_loss"));
  EXPECT_EQ(with.at("test_acc"), without.at("test_acc"));
  ASSERT_EQ(validating.epochs.size(), plain.epochs.size());
  for (size_t e = 0; e < plain.epochs.size(); ++e) {
    EXPECT_EQ(validating.epochs[e].second.at("train_loss"),
              plain.epochs[e].second.at("train_loss"));
    EXPECT_EQ(validating.epochs[e].second.at("val_loss"), plain.epochs[e].second.at("val_loss"));
  }
  auto steps_with = [](const Recorder& r, const char* key) {
    std::vector<int64_t> out;
    for (const auto& [step, values] : r.steps)
      if (values.count(key)) out.push_back(step);
    return out;
  };
  // 16 steps an epoch: a loss every 4 steps; validations at 6, 12, (16: the epoch's), 18, 24, ...
  EXPECT_EQ(steps_with(plain, "train_loss").size(), 12u);
  EXPECT_EQ(steps_with(plain, "val_acc"), (std::vector<int64_t>{16, 32, 48}));
  EXPECT_EQ(steps_with(validating, "val_acc"),
            (std::vector<int64_t>{6, 12, 16, 18, 24, 30, 32, 36, 42, 48}));
  // The same losses at the same steps.
  std::map<int64_t, double> plain_losses;
  for (const auto& [step, values] : plain.steps)
    if (values.count("train_loss")) plain_losses[step] = values.at("train_loss");
  for (const auto& [step, values] : validating.steps)
    if (values.count("train_loss")) EXPECT_EQ(values.at("train_loss"), plain_losses.at(step));
  double elapsed = 0, validation_seconds = 0;
  for (const auto& [step, values] : validating.steps) {
    ASSERT_TRUE(values.count("elapsed_seconds")) << step;
    EXPECT_GE(values.at("elapsed_seconds"), elapsed) << step;  // training time only grows
    elapsed = values.at("elapsed_seconds");
    if (values.count("val_seconds")) {
      EXPECT_GT(values.at("val_seconds"), 0);
      validation_seconds += values.at("val_seconds");
    }
  }
  EXPECT_LE(elapsed, with.at("train_seconds"));
  EXPECT_LT(validation_seconds, with.at("train_seconds"));  // inside it (MLPerf's rule)
  // The epoch's end validation is the epoch's record.
  for (const auto& [step, values] : validating.steps)
    if (step == 16 && values.count("val_acc"))
      EXPECT_EQ(values.at("val_acc"), validating.epochs[0].second.at("val_acc"));
  EXPECT_EQ(validating.attributes.at("ranks"), "1");
  EXPECT_EQ(validating.attributes.at("device_type"), "cpu");
}

// train.micro_batch_size: auto that never runs out of memory computes what whole batches compute,
// bit for bit; a fixed micro-batch trains the same steps (its sums in another order) and records
// where it ended.
TEST_F(EngineTest, MicroBatchesKeepTheStep) {
  Recorder whole, automatic, halves;
  const MetricValues a = train(spec({"train.log_every=4"}), whole);
  const MetricValues b =
      train(spec({"train.log_every=4", "train.micro_batch_size=auto"}), automatic);
  const MetricValues c = train(spec({"train.log_every=4", "train.micro_batch_size=5"}), halves);
  EXPECT_EQ(b.at("test_loss"), a.at("test_loss"));
  for (size_t e = 0; e < whole.epochs.size(); ++e)
    EXPECT_EQ(automatic.epochs[e].second.at("train_loss"), whole.epochs[e].second.at("train_loss"));
  EXPECT_EQ(b.at("micro_batch_size"), 16);
  EXPECT_EQ(b.at("oom_events"), 0);
  EXPECT_FALSE(a.count("micro_batch_size"));  // without the option, nothing new is recorded
  // Micro-batches of 5, 5, 5 and 1 sample: the same optimizer steps, the same loss up to rounding.
  EXPECT_EQ(c.at("steps"), a.at("steps"));
  EXPECT_EQ(c.at("micro_batch_size"), 5);
  EXPECT_NEAR(c.at("test_loss"), a.at("test_loss"), 1e-4);
  EXPECT_NEAR(halves.epochs[0].second.at("train_loss"), whole.epochs[0].second.at("train_loss"),
              1e-5);
}

TEST_F(EngineTest, LearnsAndReportsEveryEpochAndTheFinalFigures) {
  Recorder recorder;
  MetricValues m = train(spec(), recorder);
  ASSERT_EQ(recorder.epochs.size(), 3u);
  EXPECT_EQ(recorder.epochs[0].first, 1);
  EXPECT_LT(recorder.epochs[2].second.at("train_loss"), recorder.epochs[0].second.at("train_loss"));
  EXPECT_GT(m.at("test_acc"), 0.6);  // 4 classes: chance is 0.25
  EXPECT_EQ(m.at("steps"), 3 * 16);  // 256 / 16 batches per epoch
  EXPECT_GT(m.at("train_seconds"), 0);
  EXPECT_GT(m.at("samples_per_s"), 0);
  EXPECT_GT(m.at("peak_rss_bytes"), 1e6);
  EXPECT_EQ(m.at("peak_memory_bytes"), m.at("peak_rss_bytes"));
  EXPECT_GT(m.at("tflops"), 0);
  EXPECT_EQ(m.count("mfu"), 0u);  // no peak is known for a CPU: no MFU rather than a guess
  EXPECT_GT(recorder.epochs[1].second.at("epoch_samples_per_s"), 0);
  for (int e = 0; e < 3; ++e)  // the optimizer step each epoch ended at: where trackers plot it
    EXPECT_EQ(recorder.epochs[e].second.at("step"), 16 * (e + 1));
  double best = 0;
  for (const auto& [epoch, values] : recorder.epochs) best = std::max(best, values.at("val_acc"));
  EXPECT_DOUBLE_EQ(m.at("best_val_acc"), best);
  EXPECT_FALSE(recorder.lines.empty());
}

TEST(PeakTest, KnownDevicesOnly) {
  EXPECT_EQ(peak_tflops("NVIDIA H200", "BFloat16"), 989);  // the vendor's dense figure
  EXPECT_EQ(peak_tflops("NVIDIA H200", "Float"), 67);      // 32-true with matmul_precision highest
  EXPECT_EQ(peak_tflops("NVIDIA H200", "TensorFloat32"), 495);  // ... with high or medium
  EXPECT_EQ(peak_tflops("NVIDIA H200", "Float8_e4m3fn"), 0);    // no peak known: no MFU
  EXPECT_EQ(peak_tflops("Intel(R) Xeon(R)", "Float"), 0);
}

TEST_F(EngineTest, SameSeedSameNumbers) {
  Recorder a, b, c;
  MetricValues first = train(spec(), a);
  MetricValues second = train(spec(), b);
  EXPECT_EQ(first.at("test_loss"), second.at("test_loss"));
  EXPECT_EQ(a.epochs[2].second.at("train_loss"), b.epochs[2].second.at("train_loss"));
  MetricValues other = train(spec({"train.seed=7"}), c);
  EXPECT_NE(first.at("test_loss"), other.at("test_loss"));
}

TEST_F(EngineTest, GradientAccumulationMatchesTheLargerBatch) {
  Recorder big, accumulated;
  MetricValues a = train(spec({"train.epochs=1", "train.batch_size=32"}), big);
  MetricValues b =
      train(spec({"train.epochs=1", "train.batch_size=16", "train.grad_accum=2"}), accumulated);
  EXPECT_EQ(a.at("steps"), 8);
  EXPECT_EQ(b.at("steps"), 8);
  EXPECT_NEAR(a.at("test_loss"), b.at("test_loss"), 1e-4);
}

// train.monitor chooses the tested epoch: the lowest val_loss by default, or the highest val_acc;
// on a tie the later epoch. The run's details say which and why. Noisy images and a high learning
// rate keep the validation accuracy tied at one value over every epoch (so val_acc keeps the last)
// while the validation loss is lowest at an earlier one.
TEST_F(EngineTest, TheMonitoredFigureChoosesTheKeptEpoch) {
  std::set<int64_t> chosen;
  for (const std::string monitor : {"val_loss", "val_acc"}) {
    SCOPED_TRACE(monitor);
    Recorder recorder;
    MetricValues m = train(spec({"train.epochs=6", "train.optimizer.lr=0.03", "dataset.noise=1.0",
                                 "dataset.val_size=16", "train.monitor=" + monitor}),
                           recorder);
    int64_t expected = 0;
    double kept = 0;
    for (const auto& [epoch, values] : recorder.epochs) {
      const double value = values.at(monitor);
      if (expected == 0 || (monitor == "val_loss" ? value <= kept : value >= kept))
        expected = epoch, kept = value;
    }
    EXPECT_EQ(m.at("best_epoch"), expected);
    chosen.insert(expected);
    const std::string reason = recorder.attributes["kept_epoch"];
    EXPECT_EQ(
        reason.rfind(fmt::format("epoch {} of 6: {} ", expected,
                                 monitor == "val_loss" ? "lowest val loss" : "highest val acc"),
                     0),
        0u)
        << reason;
    EXPECT_NE(reason.find("(train.monitor: " + monitor + "; a tie keeps the later epoch)"),
              std::string::npos);
  }
  EXPECT_EQ(chosen.size(), 2u) << "both monitors kept the same epoch: the test shows nothing";
}

// train.checkpoint: last tests the weights the last epoch left, not those of the epoch the monitor
// would keep. Under a constant learning rate the first k of 6 epochs train as a run of k epochs
// does, so the weights of epoch k are also those a k-epoch run ends with.
TEST_F(EngineTest, LastCheckpointTestsTheFinalWeights) {
  const std::vector<std::string> noisy = {"train.optimizer.lr=0.03", "dataset.noise=1.0",
                                          "dataset.val_size=16", "train.monitor=val_loss"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), noisy.begin(), noisy.end());
    return spec(more);
  };
  Recorder best_recorder, last_recorder, shorter_recorder;
  const MetricValues best = train(with({"train.epochs=6"}), best_recorder);
  const auto kept = static_cast<int64_t>(best.at("best_epoch"));
  ASSERT_LT(kept, 6) << "the monitor kept the last epoch: the test shows nothing";
  const MetricValues last = train(with({"train.epochs=6", "train.checkpoint=last"}), last_recorder);
  EXPECT_EQ(last.at("best_epoch"), 6);
  EXPECT_NE(last.at("test_loss"), best.at("test_loss"));
  EXPECT_NE(last_recorder.attributes["kept_epoch"].find("the last epoch trained"),
            std::string::npos);
  // A run of `kept` epochs with checkpoint: last tests the weights of epoch `kept`: those the
  // 6-epoch run restored as its best.
  const MetricValues shorter = train(
      with({"train.epochs=" + std::to_string(kept), "train.checkpoint=last"}), shorter_recorder);
  EXPECT_EQ(shorter.at("best_epoch"), kept);
  EXPECT_EQ(shorter.at("test_loss"), best.at("test_loss"));
  EXPECT_EQ(shorter.at("test_acc"), best.at("test_acc"));
}

TEST_F(EngineTest, Bf16MixedTrainsWithAutocast) {
  Recorder recorder;
  MetricValues m = train(spec({"runtime.precision=bf16-mixed", "train.epochs=2"}), recorder);
  EXPECT_GT(m.at("test_acc"), 0.4);
  EXPECT_EQ(recorder.attributes["forward_dtype"], "BFloat16");  // observed, not configured
  bool logged = false;
  for (const auto& line : recorder.lines)
    logged = logged || line.find("compute BFloat16") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST_F(EngineTest, LimitsCapTheBatches) {
  Recorder recorder;
  MetricValues m = train(spec({"train.epochs=1", "train.limit_train_batches=3"}), recorder);
  EXPECT_EQ(m.at("steps"), 3);
}

TEST_F(EngineTest, StopRequestInterruptsTheRun) {
  Recorder recorder;
  std::atomic<bool> stop{true};
  EXPECT_THROW(train(spec(), recorder, &stop), Interrupted);
}

TEST_F(EngineTest, CudaWithoutAGpuIsAClearError) {
  if (resolve_device(RuntimeOptions{.accelerator = Accelerator::cuda}).unavailable_reason.empty())
    GTEST_SKIP() << "a GPU is present";
  Recorder recorder;
  try {
    train(spec({"runtime.accelerator=cuda"}), recorder);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "needs a CUDA device; this machine has none");
  }
}

TEST_F(EngineTest, CudaGraphsWithoutAGpuAreSkippedWithTheReason) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  RuntimeOptions runtime;
  runtime.accelerator = Accelerator::automatic;
  runtime.compile = Compile::cuda_graphs;
  EXPECT_EQ(resolve_device(runtime).unavailable_reason,
            "runtime.compile: cuda-graphs needs a CUDA device; this machine has none");
}

TEST_F(EngineTest, DistilBertLearnsSyntheticText) {
  std::string file = dir.write("text.yaml", R"(
model: {name: distilbert, vocab_size: 64, max_positions: 32, dim: 32, layers: 1, heads: 2, hidden_dim: 64}
dataset: {name: synthetic-text, vocab_size: 64, train_size: 256, val_size: 64, test_size: 128, min_length: 8, max_length: 32}
train: {epochs: 3, batch_size: 16, optimizer: {name: adam, lr: 2.0e-3}, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
)");
  Recorder recorder;
  MetricValues m = train(load_experiment(file, {}, builtin_registry()).runs.at(0), recorder);
  EXPECT_GT(m.at("test_acc"), 0.8) << "2 classes: chance is 0.5";
}

TEST_F(EngineTest, WeightsFromTheRunConfigAreLoaded) {
  std::string file = dir.write("vit.yaml", std::string(R"(
model: {name: vit, image_size: 32, patch_size: 8, depth: 2, width: 32, heads: 4, mlp_dim: 64, num_classes: 10,
        weights: ')") + TRAINYARD_SOURCE_DIR + R"(/tests/fixtures/vit_torchvision.safetensors'}
dataset: {name: synthetic-images, train_size: 32, val_size: 16, test_size: 16}
train: {epochs: 1, batch_size: 16, log_every: 1000}
runtime: {accelerator: cpu}
)");
  Recorder recorder;
  train(load_experiment(file, {}, builtin_registry()).runs.at(0), recorder);
  bool logged = false;
  for (const auto& line : recorder.lines)
    logged = logged || line.find("32 tensors loaded") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST_F(EngineTest, SavedWeightsLoadBackIntoTheSameModel) {
  Recorder recorder;
  RunSpec run = spec({"train.save_weights=true", "train.epochs=1"});
  std::string path = (dir.path() / "kept.safetensors").string();  // from the output prefix "kept"
  RunContext context{.registry = builtin_registry(),
                     .observer = recorder,
                     .output_prefix = (dir.path() / "kept").string()};
  train_run(run, context);
  ASSERT_TRUE(std::filesystem::exists(path));
  ModelPtr fresh = build_model(builtin_registry(), run.model, {.num_classes = 4});
  WeightsReport report = load_weights(*fresh, path, /*strict=*/true);
  EXPECT_EQ(report.loaded, 1 * 12 + 8);
  EXPECT_FALSE(report.head_reset);
  // A later run can start from them: model.weights takes the file.
  RunSpec again = spec({"model.weights=" + path, "train.epochs=1"});
  EXPECT_EQ(again.weights.weights, path);
}

// train.epochs: 0 tests given weights without training (Lightning's trainer.test(ckpt_path=...)):
// the saved weights of a run test exactly as that run tested them, with no training time.
TEST_F(EngineTest, ZeroEpochsTestTheGivenWeights) {
  Recorder recorder;
  RunSpec trained = spec({"train.save_weights=true", "train.epochs=2"});
  const std::string prefix = (dir.path() / "kept").string();
  const MetricValues first = train_run(
      trained,
      RunContext{.registry = builtin_registry(), .observer = recorder, .output_prefix = prefix});
  Recorder again;
  const MetricValues tested =
      train(spec({"model.weights=" + prefix + ".safetensors", "train.epochs=0"}), again);
  EXPECT_EQ(tested.at("test_loss"), first.at("test_loss"));
  EXPECT_EQ(tested.at("test_acc"), first.at("test_acc"));
  EXPECT_EQ(tested.at("steps"), 0);
  EXPECT_EQ(tested.count("train_seconds"), 0u);  // no training time, so no speedup either
  EXPECT_EQ(tested.count("best_epoch"), 0u);
  EXPECT_TRUE(again.epochs.empty());
  EXPECT_THROW(spec({"train.epochs=0"}), ConfigError);  // nothing to test without weights
}

TEST_F(EngineTest, TooFewSamplesForOneBatch) {
  Recorder recorder;
  EXPECT_THROW(train(spec({"train.batch_size=512"}), recorder), UserError);
}

}  // namespace
}  // namespace trainyard
