// The byte-level halves of the dataset and training-state readers (the LibTorch-free parts the
// fuzzers drive): each damaged input a clear UserError naming the file, never a crash, a huge
// allocation or undefined behaviour. The regressions here were found by fuzz/ and by reading.
#include <gtest/gtest.h>

#include <png.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "components/data/cifar10_file.h"
#include "components/data/image_decode.h"
#include "components/data/tokenized_texts.h"
#include "components/weights/safetensors.h"
#include "runner/engine/trainer_state.h"
#include "tests/test_support.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

template <class Read>
std::string error_of(Read read) {
  try {
    read();
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

#define EXPECT_ERROR(read, text)                                              \
  do {                                                                        \
    const std::string message = error_of([&] { read; });                      \
    EXPECT_NE(message.find(text), std::string::npos) << "error: " << message; \
  } while (0)

// --- CIFAR-10 ---------------------------------------------------------------------------------

TEST(Cifar10FileTest, RecordsAreSplitIntoLabelsAndChannelMajorImages) {
  testing::TempDir dir;
  std::string bytes;
  for (int r = 0; r < 3; ++r) {
    bytes.push_back(static_cast<char>(9 - r));
    for (int i = 0; i < Cifar10Records::kImageBytes; ++i) bytes.push_back(static_cast<char>(r + i));
  }
  const Cifar10Records records = read_cifar10_records(dir.write("b.bin", bytes));
  ASSERT_EQ(records.count, 3);
  EXPECT_EQ(records.labels, (std::vector<int64_t>{9, 8, 7}));
  // Record 2, blue channel (offset 2048), pixel (31, 31): (2 + 2048 + 1023) % 256.
  EXPECT_EQ(records.images[2 * 3072 + 2048 + 1023], (2 + 2048 + 1023) % 256);
}

TEST(Cifar10FileTest, DamagedFilesAreRefusedNamingTheFileAndRecord) {
  testing::TempDir dir;
  EXPECT_ERROR(read_cifar10_records(dir.write("empty.bin", "")), "empty.bin: the file is empty");
  EXPECT_ERROR(read_cifar10_records(dir.write("cut.bin", std::string(3074, '\1'))),
               "cut.bin: 3074 bytes is not a whole number of 3073-byte records");
  std::string two(2 * 3073, '\0');
  two[3073] = 10;
  EXPECT_ERROR(read_cifar10_records(dir.write("label.bin", two)),
               "label.bin: record 1 (byte offset 3073) has label 10");
  // A (sparse) file of a million and one records is refused from its size, before it is read.
  const std::string huge = (dir.path() / "huge.bin").string();
  std::ofstream(huge).close();
  fs::resize_file(huge, uintmax_t{1'000'001} * 3073);
  EXPECT_ERROR(read_cifar10_records(huge), "huge.bin: 1000001 records, more than the 1000000");
  EXPECT_ERROR(read_cifar10_records((dir.path() / "none.bin").string()), "none.bin: no such file");
}

// --- images -----------------------------------------------------------------------------------

TEST(ImageDecodeTest, PngDecodesToRowMajorRgbAndCorruptFilesAreRefused) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "a.png").string();
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = 3;
  image.height = 2;
  image.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> pixels(18);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(10 * i);
  ASSERT_TRUE(png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr));
  const DecodedImage decoded = decode_image(path);
  EXPECT_EQ(decoded.height, 2);
  EXPECT_EQ(decoded.width, 3);
  EXPECT_EQ(decoded.rgb, pixels);

  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_ERROR(decode_image(dir.write("cut.png", bytes.substr(0, bytes.size() - 20))),
               "cut.png: the PNG data is corrupt");
  EXPECT_ERROR(decode_image(dir.write("text.png", "not an image")), "text.png: not a readable PNG");
  EXPECT_ERROR(decode_image(dir.write("text.jpg", "not an image")),
               "text.jpg: not a readable JPEG");
  EXPECT_ERROR(decode_image(dir.write("a.gif", "GIF89a")), "a.gif: unsupported format");
  // A name that leads to a device: its size is 0, its bytes never end; read up to the limit only.
  fs::create_symlink("/dev/zero", dir.path() / "zero.jpg");
  EXPECT_ERROR(decode_image((dir.path() / "zero.jpg").string()),
               "zero.jpg: more than the limit of 268435456 bytes");
}

// --- token cache ------------------------------------------------------------------------------

TokenizedTexts two_texts() {
  TokenizedTexts texts;
  texts.add({101, 7, 102}, 1);
  texts.add({101, 102}, 0);
  return texts;
}

TEST(TokenCacheTest, WrittenCacheReadsBackForItsKeyOnly) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "cache" / "c.safetensors").string();
  write_token_cache(path, "key 1", two_texts());
  std::string damage;
  const auto texts = read_token_cache(path, "key 1", 1000, 2, &damage);
  ASSERT_TRUE(texts);
  EXPECT_EQ(texts->ids, two_texts().ids);
  EXPECT_EQ(texts->offsets, two_texts().offsets);
  EXPECT_EQ(texts->labels, two_texts().labels);
  EXPECT_FALSE(read_token_cache(path, "key 2", 1000, 2, &damage));
  EXPECT_EQ(damage, "");  // made from other inputs: not damage
  EXPECT_FALSE(read_token_cache(path + ".none", "key 1", 1000, 2, &damage));
}

// A cache whose offsets or ids point outside what it holds would have TextDataset read out of
// bounds; before, any such file with the right key was taken as it was.
TEST(TokenCacheTest, DamagedCachesAreRefusedWithTheReason) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "c.safetensors").string();
  auto refused = [&](const TokenizedTexts& texts, int64_t vocab = 1000) {
    write_token_cache(path, "k", texts);
    std::string damage;
    EXPECT_FALSE(read_token_cache(path, "k", vocab, 2, &damage));
    return damage;
  };
  TokenizedTexts past_the_end = two_texts();
  past_the_end.offsets.back() = 99;
  EXPECT_NE(refused(past_the_end).find("the last offset (99) is not the number of token ids (5)"),
            std::string::npos);
  TokenizedTexts backwards = two_texts();
  backwards.offsets[1] = 4;
  backwards.offsets[2] = 3;
  EXPECT_NE(refused(backwards).find("is before the one preceding it"), std::string::npos);
  EXPECT_NE(refused(two_texts(), 100).find("token id 101 (at 0) is outside the vocabulary of 100"),
            std::string::npos);
  TokenizedTexts label = two_texts();
  label.labels[1] = 5;
  EXPECT_NE(refused(label).find("label 5 (of text 1) is not a class of 2"), std::string::npos);
  // ids written as I64: bytes that would be read as twice the tokens.
  const std::vector<int64_t> wide = {101, 102};
  const std::vector<int64_t> offsets = {0, 2}, labels = {1};
  write_safetensors(path,
                    {{"ids", SafetensorsDtype::I64, {2}, wide.data(), 16},
                     {"offsets", SafetensorsDtype::I64, {2}, offsets.data(), 16},
                     {"labels", SafetensorsDtype::I64, {1}, labels.data(), 8}},
                    {{"key", "k"}});
  std::string damage;
  EXPECT_FALSE(read_token_cache(path, "k", 1000, 2, &damage));
  EXPECT_NE(damage.find("no one-dimensional I32 entry 'ids'"), std::string::npos) << damage;
  dir.write("c.safetensors", "garbage");
  EXPECT_FALSE(read_token_cache(path, "k", 1000, 2, &damage));
  EXPECT_NE(damage.find("c.safetensors"), std::string::npos) << damage;
}

// --- trainer state ----------------------------------------------------------------------------

TEST(TrainerStateTest, RoundTripKeepsEveryFigureIncludingNonFiniteOnes) {
  TrainerState state;
  state.epoch = 2;
  state.batch = 3;
  state.step = 11;
  state.world_size = 2;
  state.batch_size = 8;
  state.strategy = "ddp";
  state.intra_op_threads = 3;
  state.meter = {{"samples", 96}};
  // A diverged epoch: nlohmann writes NaN as null, which made the whole state unreadable.
  state.epochs[1] = {{"train_loss", std::nan("")}, {"val_loss", INFINITY}, {"val_acc", 0.25}};
  const TrainerState back = parse_trainer_state(trainer_state_json(state), "t.json");
  EXPECT_EQ(back.epoch, 2);
  EXPECT_EQ(back.batch, 3);
  EXPECT_EQ(back.step, 11);
  EXPECT_EQ(back.strategy, "ddp");
  EXPECT_EQ(back.intra_op_threads, 3);
  EXPECT_EQ(back.meter, state.meter);
  EXPECT_TRUE(std::isnan(back.epochs.at(1).at("train_loss")));
  EXPECT_EQ(back.epochs.at(1).at("val_loss"), INFINITY);
  EXPECT_EQ(back.epochs.at(1).at("val_acc"), 0.25);
  EXPECT_TRUE(std::isnan(back.best_monitored));
}

TEST(TrainerStateTest, DamagedStatesAreUserErrorsNamingTheFile) {
  const std::string base =
      R"("step": 4, "best_epoch": 0, "best_val_acc": 0.5, "strategy": "single", "world_size": 1)";
  auto parse = [&](const std::string& fields) {
    return error_of([&] { parse_trainer_state("{" + fields + "}", "s/trainer_state.json"); });
  };
  EXPECT_EQ(parse(R"("epoch": 1, )" + base), "no error");
  EXPECT_NE(parse(base).find("s/trainer_state.json: not a valid trainer state"), std::string::npos);
  // A float past int64 was cast unchecked by nlohmann's get<int64_t>(): undefined behaviour.
  EXPECT_NE(parse(R"("epoch": 1e59, )" + base).find("not a whole number"), std::string::npos);
  EXPECT_NE(parse(R"("epoch": -1, )" + base).find("'epoch' is -1, below 0"), std::string::npos);
  // An epoch key that is not a number threw std::invalid_argument from std::stoll: not a UserError.
  EXPECT_NE(parse(R"("epoch": 1, "epochs": {"x": {}}, )" + base).find("'x' in \"epochs\""),
            std::string::npos);
  EXPECT_NE(parse(R"("epoch": 1, "batch": 4611686018427387904, "batch_size": 4, )" + base)
                .find("more samples than int64 counts"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_trainer_state("[1, 2", "s/trainer_state.json");
            }).find("s/trainer_state.json: not a trainer state"),
            std::string::npos);
}

TEST(TrainerStateTest, RankEntriesAreBoundedBeforeAnythingIsSized) {
  std::string name;
  EXPECT_EQ(rank_of_state_entry("rank3/loss_sum", "r.safetensors", name), 3);
  EXPECT_EQ(name, "loss_sum");
  // rank99999999999 sized a vector of 10^11 rank states; "rankx" threw std::invalid_argument.
  for (const char* entry : {"rank99999999999/x", "rankx/y", "rank/y", "rank-1/y", "rank1", "x"})
    EXPECT_NE(error_of([&] {
                rank_of_state_entry(entry, "r.safetensors", name);
              }).find(std::string("r.safetensors: unexpected entry '") + entry + "'"),
              std::string::npos)
        << entry;
}

TEST(TrainerStateTest, FolderWhoseFilesBelongToAnotherStateIsRefused) {
  testing::TempDir dir;
  TrainerState state;
  state.epoch = 1;
  state.step = 4;
  state.strategy = "single";
  dir.write("s/trainer_state.json", trainer_state_json(state));
  const float one = 1;
  for (const char* file : {kModelStateFile, kOptimizerStateFile})
    write_safetensors((dir.path() / "s" / file).string(),
                      {{"w", SafetensorsDtype::F32, {1}, &one, 4}}, {{"state", state_mark(state)}});
  const std::string folder = (dir.path() / "s").string();
  EXPECT_EQ(read_trainer_state(folder).step, 4);
  EXPECT_TRUE(has_training_state(folder));
  write_safetensors((dir.path() / "s" / kOptimizerStateFile).string(),
                    {{"w", SafetensorsDtype::F32, {1}, &one, 4}}, {{"state", "2.0.8"}});
  EXPECT_ERROR(read_trainer_state(folder), "optimizer.safetensors does not belong to the state");
  EXPECT_FALSE(has_training_state(folder));
}

}  // namespace
}  // namespace trainyard
