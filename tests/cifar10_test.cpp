// The CIFAR-10 reader on files generated in the real binary format, and on broken ones.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "components/builtin.h"
#include "components/data/cifar10.h"
#include "components/weights/load_weights.h"
#include "tests/test_support.h"

namespace trainyard {
namespace {

// Writes `records` CIFAR-10 records: record i has label (i + offset) % 10 and every pixel of
// channel c equal to (i + c) % 256.
void write_cifar_file(const std::string& path, int records, int offset = 0) {
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < records; ++i) {
    out.put(static_cast<char>((i + offset) % 10));
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p) out.put(static_cast<char>((i + c) % 256));
  }
}

class Cifar10Test : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 1; i <= 5; ++i)
      write_cifar_file(file("data_batch_" + std::to_string(i) + ".bin"), 4, i);
    write_cifar_file(file("test_batch.bin"), 6);
  }
  std::string file(const std::string& name) const { return (dir.path() / name).string(); }
  DataSplits load(int64_t image_size, int64_t val_size = 5) {
    ComponentChoice choice{.name = "cifar10"};
    flatten_into(choice.options,
                 YAML::Load("{root: '" + dir.path().string() +
                            "', val_size: " + std::to_string(val_size) + "}"),
                 "t");
    return build_dataset(builtin_registry(), choice, {.image_size = image_size});
  }
  std::string error_of(int64_t val_size = 5) {
    try {
      load(32, val_size);
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  }
  testing::TempDir dir;
};

TEST_F(Cifar10Test, ReadsRecordsExactly) {
  torch::Tensor images, labels;
  read_cifar10_file(file("test_batch.bin"), images, labels);
  EXPECT_EQ(images.sizes(), (std::vector<int64_t>{6, 3, 32, 32}));
  EXPECT_EQ(labels[3].item<int64_t>(), 3);
  EXPECT_EQ(images[3][2][31][31].item<uint8_t>(), 5);  // record 3, blue channel: (3 + 2) % 256
}

// A batch as the model sees it: the dataset's uint8 rows through its transform.
Batch model_input(const DataSplits& splits, const DatasetPtr& split, std::vector<int64_t> indices,
                  bool training = false) {
  Batch batch = split->get_batch(indices);
  return (training ? splits.train_transform : splits.eval_transform)(batch, 0);
}

// Records nobody chose (tests/fixtures/make_cifar10_differential.py), read by the cifar10 dataset
// and its eval transform, against torchvision's CIFAR10 + ToTensor on the same bytes: bit for bit.
TEST_F(Cifar10Test, DecodesAsTorchvisionDoes) {
  const std::filesystem::path fixture =
      std::filesystem::path(TRAINYARD_SOURCE_DIR) / "tests/fixtures/cifar10_differential";
  std::filesystem::copy_file(fixture / "test_batch.bin", file("test_batch.bin"),
                             std::filesystem::copy_options::overwrite_existing);
  const auto expected = load_tensors((fixture / "torchvision.safetensors").string());
  const DataSplits splits = load(32);
  const int64_t n = expected.at("labels").size(0);
  ASSERT_EQ(splits.test->size(), n);
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  const Batch batch = model_input(splits, splits.test, all);
  EXPECT_TRUE(torch::equal(batch.targets, expected.at("labels")));
  ASSERT_EQ(batch.inputs.sizes(), expected.at("images").sizes());
  EXPECT_TRUE(torch::equal(batch.inputs, expected.at("images")))
      << "largest difference " << (batch.inputs - expected.at("images")).abs().max().item<float>();
}

TEST_F(Cifar10Test, ReferenceSplitIsLastImagesForValidation) {
  DataSplits splits = load(32);
  EXPECT_EQ(splits.train->size(), 15);  // 20 training images - 5
  EXPECT_EQ(splits.validation->size(), 5);
  EXPECT_EQ(splits.test->size(), 6);
  EXPECT_EQ(splits.num_classes, 10);
  // The first validation image is training image 15: the 4th record (index 3) of data_batch_4.
  Batch batch = model_input(splits, splits.validation, {0});
  EXPECT_EQ(batch.targets[0].item<int64_t>(), (3 + 4) % 10);
  EXPECT_NEAR(batch.inputs[0][0][0][0].item<float>(), 3.0f / 255.0f, 1e-6);
}

TEST_F(Cifar10Test, ImagesAreScaledToUnitRangeAndResized) {
  DataSplits splits = load(224);
  EXPECT_EQ(splits.train->get_batch({0}).inputs.scalar_type(), torch::kUInt8);  // stored as read
  Batch batch = model_input(splits, splits.train, {0, 1});
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{2, 3, 224, 224}));
  EXPECT_EQ(batch.inputs.dtype(), torch::kFloat);
  // A constant channel stays constant under bilinear resizing.
  EXPECT_NEAR(batch.inputs[1][1][100][7].item<float>(), 2.0f / 255.0f, 1e-6);
}

TEST_F(Cifar10Test, NormalisationAndAugmentation) {
  ComponentChoice choice{.name = "cifar10"};
  flatten_into(choice.options,
               YAML::Load("{root: '" + dir.path().string() +
                          "', val_size: 5, normalize: imagenet, augment: flip}"),
               "t");
  DataSplits splits = build_dataset(builtin_registry(), choice, {.image_size = 32});
  Batch eval = model_input(splits, splits.train, {1});
  EXPECT_NEAR(eval.inputs[0][0][5][5].item<float>(), (1.0f / 255.0f - 0.485f) / 0.229f, 1e-5);
  // Flips are decided by the batch seed: the same seed, the same batch.
  Batch raw = splits.train->get_batch({0, 1, 2, 3, 4, 5, 6, 7});
  auto a = splits.train_transform(raw, 7).inputs, b = splits.train_transform(raw, 7).inputs;
  EXPECT_TRUE(torch::equal(a, b));
}

TEST_F(Cifar10Test, MissingFileNamesItAndTheExpectedLayout) {
  std::filesystem::remove(file("data_batch_3.bin"));
  std::string error = error_of();
  EXPECT_NE(error.find("missing " + file("data_batch_3.bin")), std::string::npos) << error;
  EXPECT_NE(error.find("cifar-10-batches-bin"), std::string::npos);
}

TEST_F(Cifar10Test, TruncatedFileIsReportedWithItsSize) {
  ASSERT_EQ(truncate(file("data_batch_2.bin").c_str(), 3073 * 4 - 100), 0);
  std::string error = error_of();
  EXPECT_NE(error.find(file("data_batch_2.bin") +
                       ": 12192 bytes is not a whole number of 3073-byte records"),
            std::string::npos)
      << error;
}

TEST_F(Cifar10Test, EmptyFileAndBadLabel) {
  std::ofstream(file("test_batch.bin"), std::ios::trunc).close();
  EXPECT_NE(error_of().find("test_batch.bin: the file is empty"), std::string::npos);
  write_cifar_file(file("test_batch.bin"), 2);
  std::fstream patch(file("test_batch.bin"), std::ios::in | std::ios::out | std::ios::binary);
  patch.seekp(3073);
  patch.put(static_cast<char>(42));
  patch.close();
  EXPECT_NE(error_of().find("record 1 (byte offset 3073) has label 42"), std::string::npos);
}

TEST_F(Cifar10Test, ValidationSplitLargerThanTheDataIsRejected) {
  EXPECT_NE(error_of(20).find("val_size 20 leaves no training images"), std::string::npos);
}

TEST_F(Cifar10Test, MissingFolder) {
  ComponentChoice choice{.name = "cifar10"};
  flatten_into(choice.options, YAML::Load("{root: /no/such/folder}"), "t");
  EXPECT_THROW(build_dataset(builtin_registry(), choice, {.image_size = 32}), UserError);
}

}  // namespace
}  // namespace trainyard
