#include <gtest/gtest.h>

#include <set>

#include "components/builtin.h"
#include "trainyard/model.h"

namespace trainyard {
namespace {

ComponentChoice vit(const std::string& yaml) {
  ComponentChoice choice{.name = "vit"};
  flatten_into(choice.options, YAML::Load(yaml), "test");
  return choice;
}

TEST(VitTest, OutputShapeIsBatchByClasses) {
  ModelPtr model = build_model(builtin_registry(),
                               vit("{image_size: 32, patch_size: 8, depth: 2, width: 32, heads: 4, "
                                   "mlp_dim: 64, num_classes: 10}"),
                               {.num_classes = 10});
  Batch batch{torch::rand({3, 3, 32, 32}), torch::zeros({3}, torch::kLong), {}};
  auto logits = model->forward(batch);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 10}));
  // torchvision initialises the head to zero: the first logits are all zero.
  EXPECT_EQ(logits.abs().max().item<float>(), 0.0f);
}

TEST(VitTest, DefaultsAreVitB16WithTorchvisionParameterNames) {
  ModelPtr model = build_model(builtin_registry(), vit("{}"), {.num_classes = 1000});
  EXPECT_EQ(count_parameters(*model), 86567656);  // torchvision's vit_b_16
  std::set<std::string> names;
  for (const auto& item : model->named_parameters()) names.insert(item.key());
  for (const char* name :
       {"conv_proj.weight", "class_token", "encoder.pos_embedding",
        "encoder.layers.encoder_layer_0.ln_1.weight",
        "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
        "encoder.layers.encoder_layer_0.self_attention.out_proj.bias",
        "encoder.layers.encoder_layer_11.mlp.0.weight",
        "encoder.layers.encoder_layer_11.mlp.3.bias", "encoder.ln.weight", "heads.head.weight"})
    EXPECT_TRUE(names.count(name)) << name;
  EXPECT_EQ(names.size(), 152u);
}

TEST(VitTest, ClassCountMustMatchTheDataset) {
  try {
    build_model(builtin_registry(),
                vit("{image_size: 32, patch_size: 8, depth: 1, width: 8, heads: 2, mlp_dim: 8}"),
                {.num_classes = 10});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("set model.num_classes: 10"), std::string::npos);
  }
}

TEST(VitTest, InconsistentShapesAreRejectedAtValidation) {
  const ComponentEntry* entry = builtin_registry().find(ComponentKind::model, "vit");
  ConfigTree options;
  flatten_into(options, YAML::Load("{image_size: 30, patch_size: 8}"), "exp.yaml");
  Diagnostics d;
  entry->resolve(options, "model", {"exp.yaml", 3, 1}, {}, d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.items()[0].message, "model 'vit': image_size 30 is not a multiple of patch_size 8");
}

TEST(VitTest, WrongImageSizeIsAClearError) {
  ModelPtr model = build_model(builtin_registry(),
                               vit("{image_size: 32, patch_size: 8, depth: 1, width: 8, heads: 2, "
                                   "mlp_dim: 8, num_classes: 2}"),
                               {.num_classes = 2});
  Batch batch{torch::rand({1, 3, 64, 64}), torch::zeros({1}, torch::kLong), {}};
  try {
    model->forward(batch);
    FAIL();
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("vit expects images [B, 3, 32, 32]"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

TEST(FlopsTest, ReferenceModelsMatchThePublishedTrainingFlops) {
  // ViT-B/16 at 224 px: 105.4 GFLOP per image; distilbert-base at 512 tokens: 145 GFLOP.
  ModelPtr vit =
      build_model(builtin_registry(), ComponentChoice{.name = "vit"}, {.num_classes = 1000});
  Batch images{torch::zeros({2, 3, 1, 1}), torch::zeros({2}, torch::kLong), {}};
  EXPECT_NEAR(vit->training_flops(images) / 2 / 1e9, 105.4, 0.6);
  ComponentChoice bert{.name = "distilbert"};
  ModelPtr distilbert =
      build_model(builtin_registry(), bert, {.num_classes = 2, .vocab_size = 30522});
  Batch text{torch::zeros({3, 512}, torch::kLong), torch::zeros({3}, torch::kLong), {}};
  EXPECT_NEAR(distilbert->training_flops(text) / 3 / 1e9, 145.0, 1.5);
}

}  // namespace
}  // namespace trainyard
