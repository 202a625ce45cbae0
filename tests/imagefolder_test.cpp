// The imagefolder dataset on JPEG and PNG files the test writes: classes, decoding, resizing of
// any image size, grey and alpha images, and broken files and folders.
#include <gtest/gtest.h>

#include <png.h>
#include <turbojpeg.h>
#include <zlib.h>

#include <fstream>

#include "common/files.h"
#include "components/builtin.h"
#include "components/data/image_decode.h"
#include "components/data/imagefolder.h"
#include "runner/config/experiment.h"
#include "tests/test_support.h"
#include "trainyard/dataset.h"

namespace trainyard {
namespace {

// A solid-colour image with `channels` (1 grey, 3 RGB, 4 RGBA) written as PNG.
void write_png(const std::string& path, int width, int height, int channels,
               std::vector<uint8_t> colour) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = width;
  image.height = height;
  image.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  std::vector<uint8_t> pixels;
  for (int i = 0; i < width * height; ++i)
    pixels.insert(pixels.end(), colour.begin(), colour.end());
  ASSERT_TRUE(png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr));
}

void write_jpeg(const std::string& path, int width, int height, std::vector<uint8_t> colour) {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < width * height; ++i)
    pixels.insert(pixels.end(), colour.begin(), colour.end());
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(handle, pixels.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_444,
                        95, 0),
            0);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<char*>(jpeg), static_cast<std::streamsize>(size));
  tjFree(jpeg);
  tjDestroy(handle);
}

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* split : {"train", "val"}) {
      std::filesystem::create_directories(dir.path() / split / "cat");
      std::filesystem::create_directories(dir.path() / split / "dog");
      write_png(file(split, "cat", "a.png"), 20, 10, 3, {255, 0, 0});
      write_jpeg(file(split, "dog", "b.jpg"), 64, 48, {0, 0, 255});
    }
    write_png(file("train", "cat", "grey.PNG"), 8, 8, 1, {128});
    write_png(file("train", "dog", "alpha.png"), 8, 8, 4, {0, 255, 0, 255});
    dir.write("train/dog/notes.txt", "not an image");
  }
  std::string file(const char* split, const char* label, const char* name) {
    return (dir.path() / split / label / name).string();
  }
  DataSplits load(int64_t size = 16, const std::string& more = "") {
    ComponentChoice choice{.name = "imagefolder"};
    flatten_into(choice.options,
                 YAML::Load("{root: '" + dir.path().string() + "', normalize: none" + more + "}"),
                 "t");
    return build_dataset(builtin_registry(), choice, {.image_size = size});
  }
  std::string error_of(const std::string& more = "") {
    try {
      load(16, more);
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  }
  testing::TempDir dir;
};

TEST_F(ImageFolderTest, ClassesAreSortedFoldersAndImagesAnySize) {
  DataSplits splits = load();
  EXPECT_EQ(splits.num_classes, 2);
  EXPECT_EQ(splits.train->size(), 4);  // notes.txt ignored
  EXPECT_EQ(splits.validation->size(), 2);
  EXPECT_EQ(splits.test->size(), 2);  // no test/: the validation split
  Batch batch = splits.eval_transform(splits.train->get_batch({0, 1, 2, 3}), 0);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{4, 3, 16, 16}));
  EXPECT_EQ(batch.targets[0].item<int64_t>(), 0);  // cat/a.png
  EXPECT_EQ(batch.targets[2].item<int64_t>(), 1);  // dog/alpha.png ("alpha" < "b.jpg")
  EXPECT_NEAR(batch.inputs[0][0][5][5].item<float>(), 1.0f, 1e-6);  // red PNG, exact
  EXPECT_NEAR(batch.inputs[0][2][5][5].item<float>(), 0.0f, 1e-6);
  EXPECT_NEAR(batch.inputs[1][0][3][3].item<float>(), 128 / 255.0f, 1e-6);  // grey -> RGB
  EXPECT_NEAR(batch.inputs[2][1][3][3].item<float>(), 1.0f, 1e-6);          // RGBA green
  EXPECT_NEAR(batch.inputs[3][2][8][8].item<float>(), 1.0f, 0.03f);         // blue JPEG, lossy
}

TEST_F(ImageFolderTest, CorruptImageNamesTheFileWhenItIsRead) {
  std::ofstream(file("train", "dog", "b.jpg"), std::ios::trunc) << "JFIF? no";
  DataSplits splits = load();  // listing does not decode
  try {
    splits.train->get_batch({3});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("b.jpg: not a readable JPEG"), std::string::npos)
        << e.what();
  }
}

// Decompression bombs: a PNG and a JPEG whose headers say 60,000 x 60,000 pixels (10.8 GB decoded)
// are refused from the header, naming the file and the limit, before anything is allocated.
TEST_F(ImageFolderTest, ImagesLargerThanTheLimitAreRefusedFromTheirHeader) {
  const std::string png = file("train", "cat", "a.png"), jpeg = file("train", "dog", "b.jpg");
  auto patch = [](const std::string& path, size_t at, std::vector<uint8_t> bytes) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  };
  // PNG: IHDR's width and height (big-endian, bytes 16-23), its CRC (bytes 29-32) made again.
  patch(png, 16, {0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60});
  {
    std::ifstream in(png, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    const uint32_t crc = crc32(crc32(0, nullptr, 0), bytes.data() + 12, 17);  // "IHDR" + data
    patch(png, 29,
          {static_cast<uint8_t>(crc >> 24), static_cast<uint8_t>(crc >> 16),
           static_cast<uint8_t>(crc >> 8), static_cast<uint8_t>(crc)});
  }
  // JPEG: the SOF0 segment's height and width (FF C0, length, precision, then 2 + 2 bytes).
  {
    std::ifstream in(jpeg, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    size_t sof = 0;
    while (sof + 1 < bytes.size() && !(bytes[sof] == 0xFF && bytes[sof + 1] == 0xC0)) ++sof;
    ASSERT_LT(sof + 9, bytes.size());
    patch(jpeg, sof + 5, {0xEA, 0x60, 0xEA, 0x60});
  }
  for (const std::string& path : {png, jpeg}) {
    try {
      decode_image(path);
      ADD_FAILURE() << path << " was decoded";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": 60000 x 60000 pixels, more than the limit"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(ImageFolderTest, BrokenFolders) {
  std::filesystem::create_directories(dir.path() / "val" / "bird");
  write_png(file("val", "bird", "c.png"), 4, 4, 3, {1, 2, 3});
  EXPECT_NE(error_of().find("val/bird is a class folder that train/ lacks"), std::string::npos)
      << error_of();
  std::filesystem::rename(dir.path() / "val", dir.path() / "validation");
  EXPECT_NE(error_of().find("imagefolder: missing folder"), std::string::npos);
}

// val_fraction: of each class round(fraction x its images), at least one, never all; the same
// split for the same seed.
TEST(HeldOutForValidation, IsPerClassSeededAndLeavesEveryClassAnImageToTrainOn) {
  std::vector<int64_t> labels(10, 0);
  labels.insert(labels.end(), {1, 1, 1, 2});
  const std::vector<bool> held = held_out_for_validation(labels, 0.2, 7);
  auto held_of = [&](const std::vector<bool>& split, int64_t label) {
    int n = 0;
    for (size_t i = 0; i < labels.size(); ++i) n += split[i] && labels[i] == label;
    return n;
  };
  EXPECT_EQ(held_of(held, 0), 2);  // 0.2 x 10
  EXPECT_EQ(held_of(held, 1), 1);  // round(0.6)
  EXPECT_EQ(held_of(held, 2), 0);  // its only image stays to train on
  EXPECT_EQ(held_out_for_validation(labels, 0.2, 7), held);
  bool differs = false;
  for (int64_t seed = 8; seed < 12; ++seed)
    differs = differs || held_out_for_validation(labels, 0.2, seed) != held;
  EXPECT_TRUE(differs);
}

TEST_F(ImageFolderTest, ValFractionHoldsValidationImagesOutOfTrainWhenThereIsNoVal) {
  remove_tree((dir.path() / "val").string());  // not fs::remove_all: common/files.h
  DataSplits splits = load(16, ", val_fraction: 0.5, seed: 3");
  EXPECT_EQ(splits.train->size(), 2);  // of each class's two images, one
  EXPECT_EQ(splits.validation->size(), 2);
  const Batch train = splits.train->get_batch({0, 1}), val = splits.validation->get_batch({0, 1});
  EXPECT_EQ(train.targets[0].item<int64_t>(), 0);
  EXPECT_EQ(val.targets[0].item<int64_t>(), 0);
  EXPECT_EQ(val.targets[1].item<int64_t>(), 1);
  EXPECT_NE(error_of().find("missing folder " + (dir.path() / "val").string() +
                            "; dataset.root must hold train/<class>/ and val/<class>/ folders of "
                            "images (or set dataset.val_fraction"),
            std::string::npos)
      << error_of();
  std::filesystem::create_directories(dir.path() / "val" / "cat");
  EXPECT_NE(error_of(", val_fraction: 0.5").find("has val/ already; remove val_fraction"),
            std::string::npos);
}

// A class of train/ that val/ lacks, or holds no image of, is said at validation: not wrong, but
// its validation figures would not measure it.
TEST_F(ImageFolderTest, AClassMissingFromValIsANoteOfValidation) {
  remove_tree((dir.path() / "val" / "dog").string());
  const std::string file = dir.write("e.yaml", R"(name: e
model: {name: vit, image_size: 16, patch_size: 8, depth: 1, width: 16, heads: 2, mlp_dim: 16, num_classes: 2}
dataset: {name: imagefolder, root: ')" + dir.path().string() +
                                                   "'}\n");
  Experiment experiment = load_experiment(file, {}, builtin_registry());
  ASSERT_EQ(experiment.notes.size(), 1u);
  EXPECT_EQ(experiment.notes[0], "imagefolder: class 'dog' has no images in " +
                                     (dir.path() / "val").string() +
                                     ": the validation figures do not measure it (add some "
                                     "there, or remove val/ and set dataset.val_fraction)");
}

}  // namespace
}  // namespace trainyard
