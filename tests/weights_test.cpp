// Pretrained weights: Trainyard's ViT and DistilBERT give the same logits as torchvision's
// vit_b_16 (and timm's ViT) and transformers' DistilBertForSequenceClassification with the same
// weights (fixtures made by tests/fixtures/make_fixtures.py), and mismatches are reported.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "components/builtin.h"
#include "components/weights/load_weights.h"
#include "components/weights/safetensors.h"
#include "tests/test_support.h"
#include "trainyard/model.h"

namespace trainyard {
namespace {

std::string fixture(const std::string& name) {
  return std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/" + name;
}

torch::Tensor read_tensor(const std::string& file, const std::string& name) {
  SafetensorsFile f(file);
  const SafetensorsEntry* e = f.find(name);
  EXPECT_NE(e, nullptr) << name;
  auto dtype = e->dtype == SafetensorsDtype::I64 ? torch::kLong : torch::kFloat;
  return torch::from_blob(const_cast<uint8_t*>(e->data), e->shape, dtype).clone();
}

ModelPtr model(const std::string& name, const std::string& options, int64_t classes,
               int64_t vocab = 0) {
  ComponentChoice choice{.name = name};
  flatten_into(choice.options, YAML::Load(options), "test");
  ModelPtr m =
      build_model(builtin_registry(), choice, {.num_classes = classes, .vocab_size = vocab});
  m->eval();
  return m;
}

const char* const kVit =
    "{image_size: 32, patch_size: 8, depth: 2, width: 32, heads: 4, mlp_dim: 64, num_classes: 10}";
const char* const kBert =
    "{vocab_size: 120, max_positions: 40, dim: 32, layers: 2, heads: 4, hidden_dim: 64}";

torch::Tensor vit_logits(Model& m) {
  torch::NoGradGuard no_grad;
  return m.forward(
      {read_tensor(fixture("vit_io.safetensors"), "images"), torch::zeros({2}, torch::kLong), {}});
}

TEST(WeightsTest, VitMatchesTorchvision) {
  ModelPtr m = model("vit", kVit, 10);
  WeightsReport report = load_weights(*m, fixture("vit_torchvision.safetensors"), /*strict=*/true);
  EXPECT_EQ(report.loaded, 2 * 12 + 8);  // 2 blocks of 12 tensors + 8 others (depth 12: 152)
  EXPECT_FALSE(report.head_reset);
  torch::Tensor expected = read_tensor(fixture("vit_io.safetensors"), "logits");
  EXPECT_TRUE(torch::allclose(vit_logits(*m), expected, /*rtol=*/1e-4, /*atol=*/1e-4))
      << (vit_logits(*m) - expected).abs().max().item<float>();
}

TEST(WeightsTest, VitMatchesTimmNames) {
  ModelPtr m = model("vit", kVit, 10);
  WeightsReport report = load_weights(*m, fixture("vit_timm.safetensors"), true);
  EXPECT_TRUE(report.unexpected.empty() && report.missing.empty()) << report.summary();
  EXPECT_TRUE(torch::allclose(vit_logits(*m), read_tensor(fixture("vit_io.safetensors"), "logits"),
                              1e-4, 1e-4));
}

TEST(WeightsTest, DistilBertMatchesTransformers) {
  ModelPtr m = model("distilbert", kBert, 2, 120);
  WeightsReport report = load_weights(*m, fixture("distilbert.safetensors"), true);
  EXPECT_TRUE(report.missing.empty() && report.unexpected.empty()) << report.summary();
  std::string io = fixture("distilbert_io.safetensors");
  Batch batch{read_tensor(io, "input_ids"), torch::zeros({3}, torch::kLong),
              read_tensor(io, "attention_mask")};
  torch::NoGradGuard no_grad;
  torch::Tensor logits = m->forward(batch), expected = read_tensor(io, "logits");
  // The fixture's logits are of order one (0.24 to 3.0): 1e-4 relative is far below what GELU's
  // tanh form (0.18%) or another LayerNorm epsilon (1.1%) would change (make_fixtures.py).
  EXPECT_GT(expected.abs().min().item<float>(), 0.2);
  EXPECT_TRUE(torch::allclose(logits, expected, /*rtol=*/1e-4, /*atol=*/1e-6))
      << ((logits - expected).abs() / expected.abs()).max().item<float>();
  // Without a mask (the loader drops an all-ones one) the logits are those of an all-ones mask.
  Batch ones{batch.inputs, batch.targets, torch::ones_like(batch.inputs)};
  Batch none{batch.inputs, batch.targets, torch::Tensor()};
  torch::Tensor masked = m->forward(ones), unmasked = m->forward(none);
  EXPECT_TRUE(torch::allclose(masked, unmasked, 1e-5, 1e-5))
      << (masked - unmasked).abs().max().item<float>();
}

TEST(WeightsTest, NewLabelSetGetsAFreshHead) {
  ModelPtr m = model(
      "vit",
      "{image_size: 32, patch_size: 8, depth: 2, width: 32, heads: 4, mlp_dim: 64, num_classes: 5}",
      5);
  WeightsReport report = load_weights(*m, fixture("vit_torchvision.safetensors"), true);
  EXPECT_TRUE(report.head_reset);
  EXPECT_TRUE(report.mismatched.empty());
  auto params = m->named_parameters();
  EXPECT_EQ(params["heads.head.weight"].size(0), 5);
  EXPECT_GT(params["heads.head.weight"].abs().sum().item<float>(),
            0);  // PyTorch's default init, not zeros
  EXPECT_NE(report.summary().find("classification head initialised afresh"), std::string::npos);
}

TEST(WeightsTest, DistilBertBaseCheckpointDropsTheLanguageModelHead) {
  // distilbert-base-uncased: a bare DistilBertModel (no "distilbert." prefix) plus a masked-LM
  // head.
  testing::TempDir dir;
  SafetensorsFile source(fixture("distilbert.safetensors"));
  std::vector<SafetensorsTensor> tensors;
  std::vector<std::string> names;
  for (const auto& e : source.entries()) names.push_back(e.name);
  for (const auto& e : source.entries()) {
    if (e.name.rfind("distilbert.", 0) != 0) continue;  // no classification head
    tensors.push_back({e.name.substr(11), e.dtype, e.shape, e.data, e.bytes});
  }
  std::vector<float> projector(120, 0.5f);
  tensors.push_back({"vocab_projector.bias", SafetensorsDtype::F32, {120}, projector.data(), 480});
  std::string path = (dir.path() / "base.safetensors").string();
  write_safetensors(path, tensors);
  ModelPtr m = model("distilbert", kBert, 2, 120);
  WeightsReport report = load_weights(*m, path, true);
  EXPECT_TRUE(report.head_reset);
  EXPECT_EQ(report.dropped, (std::vector<std::string>{"vocab_projector.bias"}));
  EXPECT_EQ(report.loaded, static_cast<int64_t>(tensors.size()) - 1);
}

TEST(WeightsTest, StrictListsWhatDoesNotFit) {
  ModelPtr deeper = model("vit",
                          "{image_size: 32, patch_size: 8, depth: 3, width: 32, heads: 4, mlp_dim: "
                          "64, num_classes: 10}",
                          10);
  try {
    load_weights(*deeper, fixture("vit_torchvision.safetensors"), true);
    FAIL();
  } catch (const UserError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("vit_torchvision.safetensors: the checkpoint does not fit the model"),
              std::string::npos);
    EXPECT_NE(message.find("missing from the checkpoint: encoder.layers.encoder_layer_2."),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("model.strict: false"), std::string::npos);
  }
  ModelPtr wider = model("vit",
                         "{image_size: 32, patch_size: 8, depth: 1, width: 64, heads: 4, mlp_dim: "
                         "64, num_classes: 10}",
                         10);
  try {
    load_weights(*wider, fixture("vit_torchvision.safetensors"), true);
    FAIL();
  } catch (const UserError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("not in the model: encoder.layers.encoder_layer_1."), std::string::npos)
        << message;
    EXPECT_NE(message.find("conv_proj.weight: checkpoint [32, 3, 8, 8] vs model [64, 3, 8, 8]"),
              std::string::npos)
        << message;
    // A tensor of another shape is in the checkpoint: listed there, not as missing too.
    EXPECT_EQ(message.find("missing from the checkpoint"), std::string::npos) << message;
  }
  WeightsReport partial =
      load_weights(*deeper, fixture("vit_torchvision.safetensors"), /*strict=*/false);
  EXPECT_EQ(partial.missing.size(), 12u);  // the third block
}

TEST(WeightsTest, HalfPrecisionCheckpointsAreConverted) {
  testing::TempDir dir;
  SafetensorsFile source(fixture("vit_torchvision.safetensors"));
  std::vector<torch::Tensor> keep;
  std::vector<SafetensorsTensor> tensors;
  for (const auto& e : source.entries()) {
    keep.push_back(torch::from_blob(const_cast<uint8_t*>(e.data), e.shape, torch::kFloat)
                       .to(torch::kBFloat16)
                       .contiguous());
    tensors.push_back(
        {e.name, SafetensorsDtype::BF16, e.shape, keep.back().data_ptr(), e.bytes / 2});
  }
  std::string path = (dir.path() / "bf16.safetensors").string();
  write_safetensors(path, tensors);
  ModelPtr m = model("vit", kVit, 10);
  load_weights(*m, path, true);
  EXPECT_EQ(m->parameters()[0].scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(vit_logits(*m), read_tensor(fixture("vit_io.safetensors"), "logits"),
                              0.05, 0.05));
}

TEST(WeightsTest, CorruptFilesAreUserErrors) {
  testing::TempDir dir;
  std::string path = (dir.path() / "cut.safetensors").string();
  std::filesystem::copy_file(fixture("vit_torchvision.safetensors"), path);
  ASSERT_EQ(truncate(path.c_str(), 5000), 0);
  ModelPtr m = model("vit", kVit, 10);
  try {
    load_weights(*m, path, true);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.safetensors: tensor '"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("the file is truncated"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trainyard
