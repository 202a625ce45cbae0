// GPT-2 (model: gpt2) held to transformers' GPT2LMHeadModel: the same names and logits with the
// same weights, the Hub's bare layout loading too, and 12 steps of AdamW training to PyTorch's
// losses (fixtures by tests/fixtures/make_gpt2_fixture.py). And the causal-lm task's loss: the
// mean next-token cross-entropy over every position; the token datasets' windows.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "components/builtin.h"
#include "components/strategy/strategy.h"
#include "components/weights/load_weights.h"
#include "components/weights/safetensors.h"
#include "runner/engine/task.h"
#include "tests/test_support.h"
#include "trainyard/dataset.h"
#include "trainyard/error.h"
#include "trainyard/model.h"
#include "trainyard/optimizers.h"

namespace trainyard {
namespace {

std::string fixture(const std::string& name) {
  return std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/" + name;
}

const std::map<std::string, torch::Tensor>& reference() {
  static const auto tensors = load_tensors(fixture("gpt2_io.safetensors"));
  return tensors;
}

ModelPtr small_gpt2() {
  ComponentChoice choice{.name = "gpt2"};
  flatten_into(choice.options,
               YAML::Load("{vocab_size: 96, max_positions: 32, depth: 2, width: 32, heads: 4}"),
               "test");
  return build_model(builtin_registry(), choice, {.vocab_size = 96});
}

torch::Tensor logits_of(Model& model) {
  torch::NoGradGuard no_grad;
  model.eval();
  const torch::Tensor ids = reference().at("input_ids");
  return model.forward({ids, ids, {}});
}

TEST(Gpt2Test, LogitsEqualTransformersWithTheSameWeights) {
  ModelPtr model = small_gpt2();
  const WeightsReport report = load_weights(*model, fixture("gpt2.safetensors"), /*strict=*/true);
  // Per block: ln_1, c_attn, c_proj, ln_2, c_fc, mlp c_proj (weight and bias each); wte, wpe, ln_f.
  EXPECT_EQ(report.loaded, 2 * 12 + 4) << report.summary();
  const torch::Tensor logits = logits_of(*model);
  ASSERT_EQ(logits.sizes(), reference().at("logits").sizes());
  EXPECT_TRUE(torch::allclose(logits, reference().at("logits"), 1e-4, 1e-5))
      << (logits - reference().at("logits")).abs().max().item<float>();
}

TEST(Gpt2Test, NamesAndShapesAreHuggingFaces) {
  ModelPtr model = small_gpt2();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& p : model->named_parameters()) shapes[p.key()] = p.value().sizes().vec();
  // Conv1D stores [in, out]; the head is the token embedding, not a parameter of its own.
  EXPECT_EQ(shapes.at("transformer.h.0.attn.c_attn.weight"), (std::vector<int64_t>{32, 96}));
  EXPECT_EQ(shapes.at("transformer.h.1.mlp.c_fc.weight"), (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(shapes.at("transformer.wte.weight"), (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(shapes.count("lm_head.weight"), 0u);
  EXPECT_EQ(model->blocks().size(), 2u);
}

// The Hub's model.safetensors is a bare GPT2Model: no "transformer." prefix, the attention's
// causal-mask buffers of older exports, and a tied lm_head.weight some exports carry.
TEST(Gpt2Test, TheHubsBareLayoutLoads) {
  testing::TempDir dir;
  SafetensorsFile source(fixture("gpt2.safetensors"));
  std::vector<SafetensorsTensor> tensors;
  const SafetensorsEntry* wte = source.find("transformer.wte.weight");
  ASSERT_NE(wte, nullptr);
  for (const auto& e : source.entries())
    tensors.push_back(
        {e.name.substr(std::string("transformer.").size()), e.dtype, e.shape, e.data, e.bytes});
  std::vector<float> mask(16 * 16, 1.0f);
  tensors.push_back({"h.0.attn.bias", SafetensorsDtype::F32, {1, 1, 16, 16}, mask.data(), 1024});
  tensors.push_back({"lm_head.weight", wte->dtype, wte->shape, wte->data, wte->bytes});
  const std::string path = (dir.path() / "model.safetensors").string();
  write_safetensors(path, tensors);
  ModelPtr model = small_gpt2();
  const WeightsReport report = load_weights(*model, path, /*strict=*/true);
  EXPECT_EQ(report.loaded, 2 * 12 + 4) << report.summary();
  EXPECT_TRUE(torch::allclose(logits_of(*model), reference().at("logits"), 1e-4, 1e-5));
}

TEST(Gpt2Test, TheTasksLossIsTheMeanOverEveryPosition) {
  const TrainingTask task(Task::causal_lm);
  torch::manual_seed(1);
  const torch::Tensor logits = torch::randn({2, 3, 5}), targets = torch::randint(0, 5, {2, 3});
  double sum = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      sum -= torch::log_softmax(logits[b][t], 0)[targets[b][t].item<int64_t>()].item<double>();
  EXPECT_NEAR(task.loss(logits, targets).item<double>(), sum / 6, 1e-6);
  EXPECT_EQ(task.loss_units(targets), 6);
  EXPECT_FALSE(task.correct(logits, targets).defined());  // no accuracy
  EXPECT_TRUE(TrainingTask(Task::classification)
                  .correct(logits.select(1, 0), targets.select(1, 0))
                  .defined());
}

// The same initial weights and token batches, AdamW as torch.optim.AdamW: every step's loss is
// PyTorch's within 1e-4 relative.
TEST(Gpt2Test, TrainingLossesArePyTorchsStepForStep) {
  ModelPtr model = small_gpt2();
  load_weights(*model, fixture("gpt2.safetensors"), /*strict=*/true);
  StrategyPtr strategy = build_strategy(builtin_registry(), {.name = "single"}, {});
  strategy->setup(*model, torch::kCPU, torch::kFloat);
  ComponentChoice adamw{.name = "adamw"};
  flatten_into(adamw.options, YAML::Load("{lr: 3.0e-3, beta2: 0.95, weight_decay: 0.1}"), "test");
  OptimizerPtr optimizer =
      build_optimizer(builtin_registry(), adamw, strategy->optimizer_parameters(*model));
  const TrainingTask task(Task::causal_lm);
  const torch::Tensor expected = reference().at("losses");
  model->train();
  for (int64_t step = 0; step < expected.numel(); ++step) {
    const Batch batch{
        reference().at("train_inputs")[step], reference().at("train_targets")[step], {}};
    torch::Tensor loss = task.loss(strategy->forward(*model, batch), batch.targets);
    const double theirs = expected[step].item<double>();
    EXPECT_NEAR(loss.item<double>(), theirs, 1e-4 * theirs) << "step " << step;
    strategy->backward(loss, /*sync=*/true);
    strategy->step(optimizer->libtorch(), {});
  }
  EXPECT_LT(expected[expected.numel() - 1].item<double>(), expected[0].item<double>() - 0.5);
}

DataSplits tokens_dataset(const std::string& options) {
  ComponentChoice choice{.name = "tokens"};
  flatten_into(choice.options, YAML::Load(options), "test");
  return build_dataset(builtin_registry(), choice, {.max_positions = 32, .vocab_size = 128});
}

// A window is seq_len + 1 consecutive tokens, one every seq_len: inputs and targets shifted by one.
TEST(TokensDatasetTest, WindowsAreTheFilesTokensShiftedByOne) {
  testing::TempDir dir;
  std::vector<uint32_t> tokens(101);
  for (uint32_t i = 0; i < tokens.size(); ++i) tokens[i] = i;
  const std::string file = dir.write("tokens.bin", testing::llmc_token_file(tokens));
  const DataSplits splits = tokens_dataset("{train: " + file + ", val: " + file +
                                           ", seq_len: 8, sampler: sequential, val_size: 3}");
  EXPECT_EQ(splits.train->size(), 12);  // (101 - 1) / 8
  EXPECT_EQ(splits.validation->size(), 3);
  EXPECT_TRUE(splits.train_in_order);
  const Batch batch = splits.train->get_batch({0, 3});
  EXPECT_TRUE(torch::equal(batch.inputs[0], torch::arange(0, 8, torch::kLong)));
  EXPECT_TRUE(torch::equal(batch.targets[0], torch::arange(1, 9, torch::kLong)));
  EXPECT_TRUE(torch::equal(batch.inputs[1], torch::arange(24, 32, torch::kLong)));
  EXPECT_EQ(batch.size(), 2);
  EXPECT_FALSE(
      tokens_dataset("{train: " + file + ", val: " + file + ", seq_len: 8}").train_in_order);
  try {
    tokens_dataset("{train: " + file + ", val: " + file + ", seq_len: 64}");
    FAIL() << "a context longer than the model's positions";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("seq_len 64 is longer than the model's max_positions 32"),
              std::string::npos)
        << e.what();
  }
}

TEST(TokensDatasetTest, SyntheticTokensAreSeededAndFollowTheirChain) {
  ComponentChoice choice{.name = "synthetic-tokens"};
  flatten_into(choice.options, YAML::Load("{vocab_size: 32, seq_len: 16, train_size: 8}"), "test");
  const DataSplits a = build_dataset(builtin_registry(), choice, {});
  const DataSplits b = build_dataset(builtin_registry(), choice, {});
  const Batch first = a.train->get_batch({0, 7}), again = b.train->get_batch({0, 7});
  EXPECT_TRUE(torch::equal(first.inputs, again.inputs));
  EXPECT_EQ(first.inputs.sizes(), (std::vector<int64_t>{2, 16}));
  EXPECT_TRUE(torch::equal(first.inputs[0].narrow(0, 1, 15), first.targets[0].narrow(0, 0, 15)));
  // Each token has at most 4 successors.
  std::map<int64_t, std::set<int64_t>> successors;
  const Batch all = a.train->get_batch({0, 1, 2, 3, 4, 5, 6, 7});
  for (int64_t w = 0; w < 8; ++w)
    for (int64_t t = 0; t < 16; ++t)
      successors[all.inputs[w][t].item<int64_t>()].insert(all.targets[w][t].item<int64_t>());
  for (const auto& [token, next] : successors) EXPECT_LE(next.size(), 4u) << token;
  EXPECT_FALSE(torch::equal(a.validation->get_batch({0}).inputs, first.inputs.narrow(0, 0, 1)));
}

}  // namespace
}  // namespace trainyard
