// Content fingerprints (common/fingerprint.h): the same files anywhere give the same fingerprint;
// any change of names, sizes or (sampled) bytes gives another; the cache beside the data is used
// while names, sizes and modification times stay, and ignored when they change.
#include "common/fingerprint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/test_support.h"

namespace trainyard {
namespace {

namespace fs = std::filesystem;

// A small data folder: two files in a subfolder and one at the top.
void write_folder(const fs::path& root) {
  fs::create_directories(root / "train");
  std::ofstream(root / "train" / "a.bin") << "alpha";
  std::ofstream(root / "train" / "b.bin") << "bravo";
  std::ofstream(root / "labels.txt") << "cat\ndog\n";
}

TEST(FingerprintTest, TheSameFilesElsewhereAreTheSameDataAndAnyChangeIsOther) {
  testing::TempDir dir;
  write_folder(dir.path() / "here");
  write_folder(dir.path() / "there");
  const Fingerprint here = content_fingerprint((dir.path() / "here").string());
  EXPECT_EQ(here.files, 3);
  EXPECT_EQ(here.bytes, 18);
  EXPECT_FALSE(here.sampled);
  EXPECT_EQ(content_fingerprint((dir.path() / "there").string()).hash, here.hash);
  // Its own cache (written on the first call) is not part of the data.
  EXPECT_TRUE(fs::exists(dir.path() / "here" / ".trainyard-cache" / "fingerprint"));

  auto changed = [&](const std::string& name, auto change) {
    const fs::path copy = dir.path() / name;
    write_folder(copy);
    change(copy);
    return content_fingerprint(copy.string()).hash;
  };
  EXPECT_NE(
      changed("byte", [](const fs::path& p) { std::ofstream(p / "train" / "a.bin") << "alphA"; }),
      here.hash);
  EXPECT_NE(
      changed("renamed",
              [](const fs::path& p) { fs::rename(p / "train" / "b.bin", p / "train" / "c.bin"); }),
      here.hash);
  EXPECT_NE(changed("added", [](const fs::path& p) { std::ofstream(p / "extra") << ""; }),
            here.hash);
  EXPECT_NE(changed("removed", [](const fs::path& p) { fs::remove(p / "labels.txt"); }), here.hash);

  // One file: its bytes, whatever its name.
  const std::string one = dir.write("one.safetensors", "weights");
  const std::string other = dir.write("renamed.safetensors", "weights");
  EXPECT_EQ(content_fingerprint(one).hash, content_fingerprint(other).hash);
  EXPECT_EQ(content_fingerprint(one).describe(),
            content_fingerprint(one).hash + " (1 file, 7 bytes)");
  EXPECT_THROW(content_fingerprint((dir.path() / "missing").string()), std::runtime_error);
}

// The cache is read while every file's name, size and modification time are what it was keyed by.
// (Each call below names the folder by another path: within a process a path is walked once.)
TEST(FingerprintTest, TheCacheHoldsWhileNamesSizesAndTimesHold) {
  testing::TempDir dir;
  const fs::path data = dir.path() / "data";
  write_folder(data);
  const Fingerprint first = content_fingerprint(data.string());
  EXPECT_FALSE(first.from_cache);
  // Another hash in the cache, under the same key: what a later process would read.
  const fs::path cache = data / ".trainyard-cache" / "fingerprint";
  std::ifstream in(cache);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find(first.hash), first.hash.size(), std::string(32, 'c'));
  std::ofstream(cache) << text;
  fs::create_directory_symlink(data, dir.path() / "link1");
  const Fingerprint cached = content_fingerprint((dir.path() / "link1").string());
  EXPECT_TRUE(cached.from_cache);
  EXPECT_EQ(cached.hash, std::string(32, 'c'));
  // A file touched: the key changes, the cache is not used.
  const auto later = fs::last_write_time(data / "labels.txt") + std::chrono::seconds(5);
  fs::last_write_time(data / "labels.txt", later);
  fs::create_directory_symlink(data, dir.path() / "link2");
  const Fingerprint again = content_fingerprint((dir.path() / "link2").string());
  EXPECT_FALSE(again.from_cache);
  EXPECT_EQ(again.hash, first.hash);
}

// Beyond kWholeBytes the bytes are sampled: a large file costs kSampledBytes of reading — three
// chunks of a third of it, at its start, middle and end — so a change inside any of the three is
// seen, and one between them is not (that is the price of the sample).
TEST(FingerprintTest, ALargeFolderIsSampled) {
  testing::TempDir dir;
  auto write_large = [&](const std::string& name, int64_t poke_at) {
    const fs::path root = dir.path() / name;
    fs::create_directories(root);
    const fs::path file = root / "big.bin";
    std::ofstream(file) << "";
    fs::resize_file(file, kWholeBytes + (1 << 20));  // sparse: no disk, reads as zeros
    if (poke_at >= 0) {
      std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
      out.seekp(poke_at);
      out.put('x');
    }
    return content_fingerprint(root.string());
  };
  const Fingerprint plain = write_large("plain", -1);
  EXPECT_TRUE(plain.sampled);
  EXPECT_NE(plain.describe().find("sampled"), std::string::npos);
  EXPECT_EQ(write_large("same", -1).hash, plain.hash);
  const int64_t size = kWholeBytes + (1 << 20), chunk = kSampledBytes / 3;
  EXPECT_NE(write_large("start", 10).hash, plain.hash);
  EXPECT_NE(write_large("middle", size / 2).hash, plain.hash);
  EXPECT_NE(write_large("end", size - 1).hash, plain.hash);
  // Between the start's chunk and the middle's: not read.
  ASSERT_LT(chunk, (size - chunk) / 2 - chunk);
  EXPECT_EQ(write_large("unread", chunk + ((size - chunk) / 2 - chunk) / 2).hash, plain.hash);
}

}  // namespace
}  // namespace trainyard
