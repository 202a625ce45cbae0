// Every precision with CPU kernels trains on the CPU; the fp16 loss scaler skips overflowing steps,
// backs off and grows its scale like torch.amp.GradScaler.
#include <gtest/gtest.h>

#include <torch/optim/sgd.h>

#include "components/builtin.h"
#include "components/precision/loss_scaler.h"
#include "runner/config/experiment.h"
#include "runner/engine/engine.h"
#include "tests/test_support.h"

namespace trainyard {
namespace {

TEST(LossScalerTest, ScalesUnscalesAndSkipsOverflowingSteps) {
  auto w = torch::ones({2}, torch::requires_grad());
  torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.1));
  LossScaler scaler(torch::kCPU, {8.0, 2.0, 0.5, 2});
  EXPECT_EQ(scaler.scale(torch::ones({})).item<float>(), 8.0f);

  // A clean step: gradients come back unscaled, the step is allowed.
  scaler.scale(w.sum()).backward();
  EXPECT_EQ(w.grad()[0].item<float>(), 8.0f);
  scaler.unscale(optimizer);
  EXPECT_EQ(w.grad()[0].item<float>(), 1.0f);
  EXPECT_TRUE(scaler.step_allowed());
  scaler.update();
  EXPECT_EQ(scaler.current_scale(), 8.0);  // one clean step of the two needed to grow

  // An overflow: the step is refused, counted, and the scale halves.
  optimizer.zero_grad();
  w.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity()});
  scaler.unscale(optimizer);
  EXPECT_FALSE(scaler.step_allowed());
  scaler.update();
  EXPECT_EQ(scaler.current_scale(), 4.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);

  // Two clean steps in a row: the scale doubles.
  for (int i = 0; i < 2; ++i) {
    w.mutable_grad() = torch::ones({2});
    scaler.unscale(optimizer);
    scaler.update();
  }
  EXPECT_EQ(scaler.current_scale(), 8.0);
}

const char* const kTiny = R"(
model: {name: vit, image_size: 16, patch_size: 4, depth: 1, width: 32, heads: 2, mlp_dim: 64, num_classes: 4}
dataset: {name: synthetic-images, train_size: 128, val_size: 32, test_size: 64, num_classes: 4, noise: 0.3}
train: {epochs: 2, batch_size: 16, optimizer: {name: adam, lr: 3.0e-3}, log_every: 1000}
runtime: {accelerator: cpu, threads: 1}
)";

struct Recorder : RunObserver {
  void on_log(const std::string&) override {}
  void on_setup(const std::map<std::string, std::string>& a) override {
    for (const auto& [key, value] : a) attributes[key] = value;  // sent in several calls
  }
  void on_epoch(int64_t epoch, const MetricValues& values) override { epochs[epoch] = values; }
  std::map<std::string, std::string> attributes;
  std::map<int64_t, MetricValues> epochs;
};

// kTiny trained in `precision` (with `overrides`), with what it recorded.
struct Trained {
  MetricValues figures;
  Recorder recorder;
};
Trained train_in(const std::string& precision, std::vector<std::string> overrides = {}) {
  testing::TempDir dir;
  overrides.push_back("runtime.precision=" + precision);
  RunSpec run = load_experiment(dir.write("p.yaml", kTiny), overrides, builtin_registry()).runs[0];
  Trained trained;
  trained.figures =
      train_run(run, RunContext{.registry = builtin_registry(), .observer = trained.recorder});
  return trained;
}

// The fp32 run, trained once: what every other precision's figures must differ from.
const Trained& fp32() {
  static const Trained trained = train_in("32-true");
  return trained;
}

class PrecisionTest : public ::testing::TestWithParam<
                          std::tuple<std::string, std::string, std::string, std::string>> {};

TEST_P(PrecisionTest, TrainsOnTheCpuAndReportsItsDtypes) {
  auto [precision, param, compute, scaling] = GetParam();
  std::vector<std::string> overrides;
  if (precision == "16-true") overrides.push_back("train.optimizer.eps=1.0e-4");
  Trained trained = train_in(precision, overrides);
  const MetricValues& m = trained.figures;
  const Recorder& recorder = trained.recorder;
  EXPECT_TRUE(std::isfinite(m.at("test_loss")));
  // It learned: the training loss fell from the first epoch to the second, and the test loss is
  // well below an untrained model's ln 4 = 1.386 (4 classes).
  EXPECT_LT(recorder.epochs.at(2).at("train_loss"), recorder.epochs.at(1).at("train_loss"));
  EXPECT_LT(m.at("test_loss"), 1.2) << precision;
  // What its forward computed in, observed in a training step (the dtype of the model's output),
  // is the precision's compute dtype: under bf16-mixed, autocast reached the model.
  EXPECT_EQ(recorder.attributes.at("forward_dtype"), compute);
  // And its figures are its own: every lower precision's differ from fp32's.
  if (precision != "32-true") {
    EXPECT_NE(m.at("test_loss"), fp32().figures.at("test_loss"));
    EXPECT_NE(recorder.epochs.at(1).at("train_loss"),
              fp32().recorder.epochs.at(1).at("train_loss"));
  }
  EXPECT_EQ(recorder.attributes.at("param_dtype"), param);
  EXPECT_EQ(recorder.attributes.at("compute_dtype"), compute);
  EXPECT_EQ(recorder.attributes.at("grad_dtype"), param);
  EXPECT_EQ(recorder.attributes.at("reduce_dtype"), "Float");
  EXPECT_EQ(recorder.attributes.at("loss_scaling"), scaling);
  EXPECT_EQ(m.count("skipped_steps"), 1u);
}

TEST(PrecisionValidationTest, FloatSixteenWithAdamsDefaultEpsIsRejected) {
  testing::TempDir dir;
  try {
    load_experiment(dir.write("p.yaml", kTiny), {"runtime.precision=16-true"}, builtin_registry());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "train.optimizer.eps 1e-08 rounds to 0 and adam divides by zero"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPrecision, PrecisionTest,
                         ::testing::Values(std::tuple{"32-true", "Float", "Float", "none"},
                                           std::tuple{"bf16-mixed", "Float", "BFloat16", "none"},
                                           std::tuple{"16-mixed", "Float", "Half", "dynamic"},
                                           std::tuple{"bf16-true", "BFloat16", "BFloat16", "none"},
                                           std::tuple{"16-true", "Half", "Half", "none"}),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           for (auto& c : name)
                             if (c == '-') c = '_';
                           return "p" + name;
                         });

}  // namespace
}  // namespace trainyard
