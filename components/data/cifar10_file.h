// One file of CIFAR-10's binary distribution, read into plain memory: a sequence of 3073-byte
// records, each one label byte (0-9), then a 32x32 image as 1024 red, 1024 green and 1024 blue
// bytes, row-major. LibTorch-free (trainyard_core), so that the fuzzer drives the very code the
// dataset loads with; cifar10.cpp makes the records tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainyard {

struct Cifar10Records {
  static constexpr int64_t kSide = 32;
  static constexpr int64_t kImageBytes = 3 * kSide * kSide;
  static constexpr int64_t kRecordBytes = 1 + kImageBytes;
  static constexpr int64_t kClasses = 10;

  int64_t count = 0;
  std::vector<int64_t> labels;  // count, each 0-9
  std::vector<uint8_t> images;  // count x 3 x 32 x 32
};

// Throws UserError naming the file (and the record) on a missing, empty, truncated or malformed
// file, and on one too big to be CIFAR-10.
Cifar10Records read_cifar10_records(const std::string& path);

}  // namespace trainyard
