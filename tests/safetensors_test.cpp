// The safetensors reader validates everything before reading: each broken file is a clear error
// naming the file and the tensor, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "components/weights/safetensors.h"
#include "tests/test_support.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

// A file with an exact header text and `data_bytes` zero bytes of data.
std::string raw_file(const testing::TempDir& dir, const std::string& header, size_t data_bytes,
                     uint64_t declared_length = UINT64_MAX) {
  std::string bytes;
  uint64_t length = declared_length == UINT64_MAX ? header.size() : declared_length;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  bytes += header;
  bytes.append(data_bytes, '\0');
  return dir.write("w.safetensors", bytes);
}

std::string error_of(const std::string& path) {
  try {
    SafetensorsFile file(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SafetensorsTest, WritesAndReadsBack) {
  testing::TempDir dir;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {0x3f80, 0x4000};  // bf16 1.0, 2.0
  std::string path = (dir.path() / "w.safetensors").string();
  write_safetensors(path,
                    {{"a", SafetensorsDtype::F32, {2, 3}, a.data(), 24},
                     {"b.c", SafetensorsDtype::BF16, {2}, b.data(), 4}},
                    {{"format", "pt"}});
  SafetensorsFile file(path);
  ASSERT_EQ(file.entries().size(), 2u);
  const SafetensorsEntry* entry = file.find("a");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(entry->bytes, 24u);
  EXPECT_EQ(reinterpret_cast<const float*>(entry->data)[5], 6.0f);
  EXPECT_EQ(file.find("b.c")->dtype, SafetensorsDtype::BF16);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(entry->data) % 8, 0u);  // data is aligned
}

TEST(SafetensorsTest, ReadsTheReferenceImplementationsFiles) {
  SafetensorsFile file(std::string(TRAINYARD_SOURCE_DIR) +
                       "/tests/fixtures/vit_torchvision.safetensors");
  const SafetensorsEntry* head = file.find("heads.head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->shape, (std::vector<int64_t>{10, 32}));
  EXPECT_EQ(head->dtype, SafetensorsDtype::F32);
}

TEST(SafetensorsTest, TooShortAndHeaderLengthProblems) {
  testing::TempDir dir;
  EXPECT_NE(error_of(dir.write("w.safetensors", "abc")).find("3 bytes is too short"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file(dir, "{}", 0, 1ull << 40)).find("exceeds the format's limit"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file(dir, "{}", 0, 1000)).find("runs past the end of the 10-byte file"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file(dir, "{not json", 0)).find("the header is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of(raw_file(dir, "[1, 2]", 0)).find("must be a JSON object"), std::string::npos);
  EXPECT_NE(error_of((dir.path() / "absent").string()).find("No such file"), std::string::npos);
}

TEST(SafetensorsTest, EntryProblemsNameTheTensor) {
  testing::TempDir dir;
  auto check = [&](const std::string& header, size_t data, const std::string& expected) {
    std::string error = error_of(raw_file(dir, header, data));
    EXPECT_NE(error.find(expected), std::string::npos) << header << "\n -> " << error;
  };
  check(R"({"w": {"dtype": "F32", "shape": [2]}})", 8,
        "tensor 'w': entry must have dtype, shape and data_offsets");
  check(R"({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", 2,
        "tensor 'w': unsupported dtype \"F8_E4M3\"");
  check(R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8,
        "shape [-2] must hold non-negative integers");
  check(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8,
        "end before they begin");
  check(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4,
        "run past the 4 data bytes of the file; the file is truncated");
  check(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8,
        "8 bytes of data, but shape [3] of F32 needs 12");
  check(
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
      12, "tensor 'b' overlaps the tensor before it");
  check(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8,
        "bytes 0 to 4 before tensor 'a' belong to no tensor");
  check(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 8,
        "the last 4 data bytes belong to no tensor");
  check(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4,
        "impossibly large");
}

}  // namespace
}  // namespace trainyard

namespace trainyard {
namespace {

std::string hex_of(const uint8_t* data, size_t bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 15];
  }
  return out;
}

// Found by the differential test: an empty tensor shares its offset with the next one.
TEST(SafetensorsTest, AnEmptyTensorBesideTheNextOneIsNoOverlap) {
  testing::TempDir dir;
  const std::string path = raw_file(
      dir,
      R"({"b":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[2,0],"data_offsets":[0,0]}})",
      4);
  SafetensorsFile file(path);
  ASSERT_EQ(file.entries().size(), 2u);
  EXPECT_EQ(file.find("a")->bytes, 0u);
  EXPECT_EQ(file.find("b")->bytes, 4u);
}

// Differential: 24 files the reference implementation (the safetensors package) wrote, with
// dtypes, shapes (scalars and empty tensors too), names and metadata nobody chose
// (fixtures/make_safetensors_differential.py): every tensor's dtype, shape and bytes as it wrote
// them; then our writer's copy of each file reads back the same.
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(SafetensorsTest, ReadsWhatTheReferenceWroteAndWritesItBack) {
  const std::string folder =
      std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/safetensors_differential/";
  std::ifstream in(folder + "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  ASSERT_GE(expected["files"].size(), 20u);
  testing::TempDir dir;
  for (const auto& [name, want] : expected["files"].items()) {
    SafetensorsFile file(folder + name);
    EXPECT_EQ(file.entries().size(), want["tensors"].size()) << name;
    using Metadata = std::map<std::string, std::string>;
    EXPECT_EQ(file.metadata(), want["metadata"].get<Metadata>()) << name;
    std::vector<SafetensorsTensor> copy;
    for (const auto& [tensor, t] : want["tensors"].items()) {
      const SafetensorsEntry* entry = file.find(tensor);
      ASSERT_NE(entry, nullptr) << name << ": " << tensor;
      EXPECT_STREQ(to_string(entry->dtype), t["dtype"].get<std::string>().c_str()) << tensor;
      EXPECT_EQ(entry->shape, t["shape"].get<std::vector<int64_t>>()) << tensor;
      EXPECT_EQ(hex_of(entry->data, entry->bytes), t["hex"].get<std::string>()) << tensor;
      copy.push_back({entry->name, entry->dtype, entry->shape, entry->data, entry->bytes});
    }
    const std::string written = (dir.path() / name).string();
    write_safetensors(written, copy, file.metadata());
    SafetensorsFile again(written);
    ASSERT_EQ(again.entries().size(), copy.size()) << name;
    for (const SafetensorsTensor& t : copy) {
      const SafetensorsEntry* entry = again.find(t.name);
      ASSERT_NE(entry, nullptr);
      EXPECT_EQ(entry->shape, t.shape);
      EXPECT_EQ(hex_of(entry->data, entry->bytes),
                hex_of(static_cast<const uint8_t*>(t.data), t.bytes));
    }
    EXPECT_EQ(again.metadata(), file.metadata());

    // Written in the reference's order of the data (as it lays tensors out), our file is the
    // reference's own: the same header length (padding), the same header as JSON (key order
    // aside: JSON objects have none, and the reference keeps its metadata in a hash map), the same
    // data bytes. So the reference reads what our writer writes as it reads its own files.
    std::sort(copy.begin(), copy.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
      return a.data != b.data ? a.data < b.data : a.bytes < b.bytes;  // empty ones first
    });
    write_safetensors(written, copy, file.metadata());
    const std::string ours = read_all(written), theirs = read_all(folder + name);
    ASSERT_GE(ours.size(), 8u);
    ASSERT_EQ(ours.size(), theirs.size()) << name;
    EXPECT_EQ(ours.substr(0, 8), theirs.substr(0, 8)) << name << ": header lengths differ";
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<uint8_t>(ours[i]);
    EXPECT_EQ(nlohmann::json::parse(ours.substr(8, length)),
              nlohmann::json::parse(theirs.substr(8, length)))
        << name;
    EXPECT_EQ(ours.substr(8 + length), theirs.substr(8 + length)) << name << ": data differ";
  }
}

}  // namespace
}  // namespace trainyard
