// model: torchscript against PyTorch, on the fixture tests/fixtures/make_torchscript_fixture.py
// made: two scripted networks (a CNN with BatchNorm and dropout, an attention text classifier)
// give PyTorch's logits, train to PyTorch's losses over 12 steps of the engine's own step
// (strategy and registry optimizer), keep the module's own names, load safetensors exported from
// the Python model, run under autocast, and validation refuses what cannot train.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <torch/nn/functional/loss.h>

#include "components/builtin.h"
#include "components/precision/precision.h"
#include "components/strategy/strategy.h"
#include "components/weights/load_weights.h"
#include "tests/test_support.h"
#include "trainyard/model.h"
#include "trainyard/optimizers.h"

namespace trainyard {
namespace {

std::string fixture(const std::string& name) {
  return std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/" + name;
}

const std::map<std::string, torch::Tensor>& reference() {
  static const auto tensors = load_tensors(fixture("torchscript_io.safetensors"));
  return tensors;
}

Chosen<ModelCapabilities> choice(const std::string& yaml) {
  Chosen<ModelCapabilities> c;
  c.name = "torchscript";
  flatten_into(c.options, YAML::Load(yaml), "test");
  const ComponentEntry* entry = builtin_registry().find(ComponentKind::model, "torchscript");
  Diagnostics diagnostics;
  c.options = entry->resolve(c.options, "model", {}, {}, diagnostics);
  EXPECT_TRUE(diagnostics.empty());
  c.capabilities = std::get<ModelCapabilities>(entry->capabilities(c.options));
  return c;
}

Chosen<ModelCapabilities> cnn_choice() {
  return choice(fmt::format("{{file: {}, image_size: 8}}", fixture("torchscript_cnn.pt")));
}
Chosen<ModelCapabilities> text_choice() {
  return choice(fmt::format("{{file: {}, input: tokens, max_positions: 16}}",
                            fixture("torchscript_text.pt")));
}

ModelPtr build(const ComponentChoice& c, int64_t classes) {
  return build_model(builtin_registry(), c, {.num_classes = classes});
}

Batch cnn_batch(int64_t step) {
  return {reference().at("cnn/inputs")[step], reference().at("cnn/targets")[step], {}};
}
Batch text_batch(int64_t step) {
  return {reference().at("text/input_ids")[step], reference().at("text/targets")[step],
          reference().at("text/attention_mask")[step]};
}

class TorchScriptTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
  testing::TempDir dir;
};

TEST_F(TorchScriptTest, ValidationReadsTheArchive) {
  const ModelCapabilities cnn = cnn_choice().capabilities;
  EXPECT_TRUE(cnn.files.problems.empty());
  EXPECT_EQ(cnn.num_classes, 4);  // from the trial forward: the option is 0
  EXPECT_EQ(cnn.image_size, 8);
  EXPECT_EQ(cnn.max_positions, 0);
  EXPECT_NE(cnn.cuda_graphs_refusal.find("runtime.compile: none"), std::string::npos);
  const ModelCapabilities text = text_choice().capabilities;
  EXPECT_TRUE(text.files.problems.empty());
  EXPECT_EQ(text.num_classes, 3);
  EXPECT_EQ(text.vocab_size, 64);  // the rows of the embedding that reads input_ids
  EXPECT_EQ(text.max_positions, 16);
}

TEST_F(TorchScriptTest, LogitsArePyTorchs) {
  torch::NoGradGuard no_grad;
  ModelPtr cnn = build(cnn_choice(), 4);
  cnn->eval();
  EXPECT_TRUE(
      torch::allclose(cnn->forward(cnn_batch(0)), reference().at("cnn/eval_logits"), 1e-5, 1e-5));
  ModelPtr text = build(text_choice(), 3);
  text->eval();
  EXPECT_TRUE(torch::allclose(text->forward(text_batch(0)), reference().at("text/eval_logits"),
                              1e-5, 1e-5));
}

// The parameters and buffers are the module's, under its own names (Python's state_dict keys).
TEST_F(TorchScriptTest, TensorsKeepTheModulesOwnNames) {
  ModelPtr cnn = build(cnn_choice(), 4);
  std::set<std::string> ours;
  for (const auto& p : cnn->named_parameters()) ours.insert(p.key());
  for (const auto& b : cnn->named_buffers()) ours.insert(b.key());
  std::set<std::string> pythons;
  for (const auto& [name, tensor] : load_tensors(fixture("torchscript_trained.safetensors")))
    pythons.insert(name);
  EXPECT_EQ(ours, pythons);
  EXPECT_TRUE(ours.count("bn1.running_mean"));
  EXPECT_TRUE(ours.count("bn2.num_batches_tracked"));
}

// SGD with momentum and weight decay on the CNN (BatchNorm in train mode, dropout 0.25 drawn from
// the seeded generator), AdamW on the text classifier: every step's loss is PyTorch's within 1e-4
// relative, and the CNN ends with PyTorch's weights and running statistics.
TEST_F(TorchScriptTest, TrainingLossesArePyTorchsStepForStep) {
  struct Case {
    const char* name;
    ComponentChoice model;
    int64_t classes;
    const char* optimizer;
    const char* optimizer_options;
    Batch (*batch)(int64_t);
  };
  for (const Case& c :
       {Case{"cnn", cnn_choice(), 4, "sgd", "{lr: 0.05, momentum: 0.9, weight_decay: 5.0e-4}",
             cnn_batch},
        Case{"text", text_choice(), 3, "adamw", "{lr: 0.01, weight_decay: 0.01}", text_batch}}) {
    SCOPED_TRACE(c.name);
    ModelPtr model = build(c.model, c.classes);
    StrategyPtr strategy = build_strategy(builtin_registry(), {.name = "single"}, {});
    strategy->setup(*model, torch::kCPU, torch::kFloat);
    ComponentChoice optimizer_choice{.name = c.optimizer};
    flatten_into(optimizer_choice.options, YAML::Load(c.optimizer_options), "test");
    OptimizerPtr optimizer = build_optimizer(builtin_registry(), optimizer_choice,
                                             strategy->optimizer_parameters(*model));
    const torch::Tensor expected = reference().at(std::string(c.name) + "/losses");
    model->train();
    torch::manual_seed(123);
    for (int64_t step = 0; step < expected.numel(); ++step) {
      const Batch batch = c.batch(step);
      torch::Tensor loss =
          torch::nn::functional::cross_entropy(strategy->forward(*model, batch), batch.targets);
      const double theirs = expected[step].item<double>();
      EXPECT_NEAR(loss.item<double>(), theirs, 1e-4 * theirs) << "step " << step;
      strategy->backward(loss, /*sync=*/true);
      strategy->step(optimizer->libtorch(), {});
    }
    if (std::string(c.name) != "cnn") continue;
    const auto trained = load_tensors(fixture("torchscript_trained.safetensors"));
    for (const auto& p : model->named_parameters())
      EXPECT_TRUE(torch::allclose(p.value(), trained.at(p.key()), 1e-4, 1e-5)) << p.key();
    for (const auto& b : model->named_buffers())
      EXPECT_TRUE(b.value().is_floating_point()
                      ? torch::allclose(b.value(), trained.at(b.key()), 1e-4, 1e-5)
                      : torch::equal(b.value(), trained.at(b.key())))  // num_batches_tracked
          << b.key();
  }
}

// `logits`, computed in bfloat16, against PyTorch's bfloat16 logits of the same module and batch
// (`reference_name`): equal to 5e-5, where the float32 logits (`fp32`) are up to 4e-4 away and
// fail. On the fixture's CPU they are equal bit for bit; the margin is for another CPU's bfloat16
// kernels, which sum in float32 in another order and may round an element the other way.
void expect_bfloat16_reference(const torch::Tensor& logits, const torch::Tensor& fp32,
                               const std::string& reference_name) {
  const torch::Tensor expected = reference().at(reference_name).to(torch::kFloat);
  const torch::Tensor ours = logits.to(torch::kFloat);
  EXPECT_TRUE(torch::allclose(ours, expected, /*rtol=*/0, /*atol=*/5e-5))
      << (ours - expected).abs().max().item<float>();
  ASSERT_EQ(fp32.scalar_type(), torch::kFloat);
  EXPECT_FALSE(torch::allclose(fp32, expected, 0, 5e-5))
      << "the float32 logits pass too: the comparison cannot tell the precisions apart";
}

// Autocast is a dispatcher key: the interpreter's ops meet it as eager PyTorch's do, so bf16-mixed
// gives PyTorch's autocast logits (bfloat16), and the BatchNorm statistics stay float32.
TEST_F(TorchScriptTest, AutocastReachesTheInterpretedOps) {
  torch::NoGradGuard no_grad;
  ModelPtr cnn = build(cnn_choice(), 4);
  cnn->eval();
  PrecisionPtr bf16 = build_precision(builtin_registry(), "bf16-mixed", {});
  torch::Tensor logits;
  {
    Precision::AutocastScope autocast(*bf16, torch::kCPU);
    logits = cnn->forward(cnn_batch(0));
  }
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  expect_bfloat16_reference(logits, cnn->forward(cnn_batch(0)), "cnn/bf16_logits");
  for (const auto& b : cnn->named_buffers()) {
    if (b.value().is_floating_point()) {
      EXPECT_EQ(b.value().scalar_type(), torch::kFloat);
    }
  }
}

// bf16-true converts the module's own tensors (the interpreter sees the same ones) and the images.
TEST_F(TorchScriptTest, HalfPrecisionParametersReachTheInterpreter) {
  torch::NoGradGuard no_grad;
  ModelPtr cnn = build(cnn_choice(), 4);
  cnn->eval();
  cnn->to(torch::kCPU, torch::kBFloat16);
  torch::Tensor logits = cnn->forward(cnn_batch(0));
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  ModelPtr fp32 = build(cnn_choice(), 4);
  fp32->eval();
  expect_bfloat16_reference(logits, fp32->forward(cnn_batch(0)), "cnn/bf16_true_logits");
}

// Under a half precision (bf16-true) the strategies put floating-point tensors in bfloat16 and
// leave integer buffers as they are, as PyTorch's Module.to does: BatchNorm counts its batches in
// int64 past 256, where bfloat16 could not (LibTorch's own Module::to(dtype) converts them).
TEST_F(TorchScriptTest, IntegerBuffersKeepTheirTypeUnderAHalfPrecision) {
  ModelPtr cnn = build(cnn_choice(), 4);
  StrategyPtr strategy = build_strategy(builtin_registry(), {.name = "single"}, {});
  strategy->setup(*cnn, torch::kCPU, torch::kBFloat16);
  torch::Tensor tracked;
  for (const auto& buffer : cnn->named_buffers()) {
    if (buffer.key().ends_with("num_batches_tracked")) {
      EXPECT_EQ(buffer.value().scalar_type(), torch::kLong) << buffer.key();
      tracked = buffer.value();
    } else {
      EXPECT_EQ(buffer.value().scalar_type(), torch::kBFloat16) << buffer.key();
    }
  }
  for (const auto& parameter : cnn->parameters())
    EXPECT_EQ(parameter.scalar_type(), torch::kBFloat16);
  ASSERT_TRUE(tracked.defined());
  tracked.fill_(300);
  cnn->train();
  torch::NoGradGuard no_grad;
  Batch batch = cnn_batch(0);
  batch.inputs = batch.inputs.to(torch::kBFloat16);
  cnn->forward(batch);
  EXPECT_EQ(tracked.item<int64_t>(), 301);
}

// A state dict exported from the Python model (safetensors.torch.save_file) loads as model.weights
// and gives the Python model's logits; the engine's own export loads back the same.
TEST_F(TorchScriptTest, LoadsSafetensorsExportedFromPython) {
  ModelPtr cnn = build(cnn_choice(), 4);
  WeightsReport report =
      load_weights(*cnn, fixture("torchscript_trained.safetensors"), /*strict=*/true);
  EXPECT_EQ(report.loaded, 16) << report.summary();  // two convolutions, two BatchNorms, the head
  torch::NoGradGuard no_grad;
  cnn->eval();
  const torch::Tensor expected = reference().at("cnn/trained_logits");
  EXPECT_TRUE(torch::allclose(cnn->forward(cnn_batch(0)), expected, 1e-5, 1e-5));
  const std::string saved = (dir.path() / "saved.safetensors").string();
  save_weights(*cnn, saved);
  ModelPtr again = build(cnn_choice(), 4);
  load_weights(*again, saved, /*strict=*/true);
  again->eval();
  EXPECT_TRUE(torch::equal(again->forward(cnn_batch(0)), cnn->forward(cnn_batch(0))));
}

std::string first_problem(const std::string& yaml) {
  const FileChecks c = choice(yaml).capabilities.files;
  return c.problems.empty() ? "" : c.problems.front().first + ": " + c.problems.front().second;
}

TEST_F(TorchScriptTest, ValidationRefusesWhatCannotTrain) {
  // A traced module: its BatchNorm and dropout were recorded with training fixed.
  std::string problem =
      first_problem(fmt::format("{{file: {}, image_size: 8}}", fixture("torchscript_traced.pt")));
  EXPECT_NE(problem.find("file: model.file '"), std::string::npos) << problem;
  EXPECT_NE(problem.find("made by torch.jit.trace"), std::string::npos) << problem;
  EXPECT_NE(problem.find("aten::batch_norm (training frozen to true)"), std::string::npos)
      << problem;
  EXPECT_NE(problem.find("torch.jit.script(model)"), std::string::npos) << problem;
  // Not an archive: a safetensors file, and a missing file.
  problem = first_problem(
      fmt::format("{{file: {}, image_size: 8}}", fixture("torchscript_trained.safetensors")));
  EXPECT_NE(problem.find("is not a TorchScript archive"), std::string::npos) << problem;
  problem = first_problem(fmt::format("{{file: {}/none.pt}}", dir.path().string()));
  EXPECT_NE(problem.find("no such file"), std::string::npos) << problem;
  // The text module where images are said: its forward is named.
  problem = first_problem(fmt::format("{{file: {}}}", fixture("torchscript_text.pt")));
  EXPECT_NE(problem.find("its forward is forward(Tensor input_ids, Tensor attention_mask) -> "
                         "Tensor; model.input: images needs forward(Tensor images) -> Tensor"),
            std::string::npos)
      << problem;
  // The CNN at a size its layers accept but num_classes set wrong; and tokens where it takes
  // images.
  problem = first_problem(
      fmt::format("{{file: {}, image_size: 8, num_classes: 10}}", fixture("torchscript_cnn.pt")));
  EXPECT_NE(problem.find("num_classes: model.num_classes is 10 but"), std::string::npos) << problem;
  EXPECT_NE(problem.find("returns 4 logits per sample"), std::string::npos) << problem;
  problem =
      first_problem(fmt::format("{{file: {}, input: tokens}}", fixture("torchscript_cnn.pt")));
  EXPECT_NE(problem.find("its forward is forward(Tensor x) -> Tensor"), std::string::npos)
      << problem;
}

// What review found: normalisations without running statistics and RReLU have constant training
// flags in scripts too, and are accepted; an in-place dropout traced in train mode is refused; a
// Linear reached under two names is one set of parameters, as in PyTorch (28, not 40).
TEST_F(TorchScriptTest, TellsTracedFromScriptedAndKeepsTiedWeightsOnce) {
  EXPECT_EQ(
      first_problem(fmt::format("{{file: {}, image_size: 8}}", fixture("torchscript_norms.pt"))),
      "");
  const std::string problem = first_problem(
      fmt::format("{{file: {}, image_size: 8}}", fixture("torchscript_traced_inplace.pt")));
  EXPECT_NE(problem.find("aten::feature_dropout_ (training frozen to true)"), std::string::npos)
      << problem;
  ModelPtr tied =
      build(choice(fmt::format("{{file: {}, image_size: 8}}", fixture("torchscript_tied.pt"))), 4);
  EXPECT_EQ(count_parameters(*tied), 28);
  EXPECT_EQ(tied->parameters().size(), 4u);
}

// An allocation that fails inside the interpreter arrives wrapped in the interpreter's traceback;
// the model keeps the allocator's words in the message's first line, which classifies the failure.
TEST_F(TorchScriptTest, AnAllocationFailureInsideTheInterpreterSaysOutOfMemory) {
  ModelPtr huge =
      build(choice(fmt::format("{{file: {}, image_size: 8}}", fixture("torchscript_huge.pt"))), 4);
  huge->train();
  try {
    huge->forward(cnn_batch(0));
    FAIL() << "2^50 bytes were allocated";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find("can't allocate memory"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace trainyard
