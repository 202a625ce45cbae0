#include "components/data/cifar10_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "trainyard/error.h"

namespace trainyard {

namespace {

// The largest file of the distribution holds 10,000 records (30 MB); a file many times that is
// not one of them, and is refused before it is read whole.
constexpr int64_t kMaxRecords = 1'000'000;

}  // namespace

Cifar10Records read_cifar10_records(const std::string& path) {
  constexpr int64_t kRecordBytes = Cifar10Records::kRecordBytes;
  constexpr int64_t kImageBytes = Cifar10Records::kImageBytes;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw UserError(fmt::format("cifar10: {}: no such file", path));
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec || bytes == 0) throw UserError(fmt::format("cifar10: {}: the file is empty", path));
  if (bytes % kRecordBytes != 0)
    throw UserError(fmt::format(
        "cifar10: {}: {} bytes is not a whole number of 3073-byte records (label + 32x32x3 image); "
        "the file is truncated or not from the CIFAR-10 binary version",
        path, bytes));
  Cifar10Records records;
  records.count = bytes / kRecordBytes;
  if (records.count > kMaxRecords)
    throw UserError(fmt::format(
        "cifar10: {}: {} records, more than the {} a file of CIFAR-10 may hold (it has 10,000 a "
        "file); dataset.root names the wrong folder",
        path, records.count, kMaxRecords));
  std::vector<uint8_t> raw(static_cast<size_t>(bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(raw.data()), bytes))
    throw UserError(fmt::format("cifar10: {}: read failed", path));

  records.labels.resize(static_cast<size_t>(records.count));
  records.images.resize(static_cast<size_t>(records.count * kImageBytes));
  for (int64_t r = 0; r < records.count; ++r) {
    const uint8_t* record = raw.data() + r * kRecordBytes;
    if (record[0] >= Cifar10Records::kClasses)
      throw UserError(fmt::format(
          "cifar10: {}: record {} (byte offset {}) has label {}, but CIFAR-10 labels are 0-9; "
          "the file is corrupt or not CIFAR-10 (CIFAR-100's binary format differs)",
          path, r, r * kRecordBytes, record[0]));
    records.labels[r] = record[0];
    std::memcpy(records.images.data() + r * kImageBytes, record + 1, kImageBytes);
  }
  return records;
}

}  // namespace trainyard
