// CIFAR-10 from its binary distribution (cifar-10-batches-bin): data_batch_1..5.bin and
// test_batch.bin, each a sequence of 3073-byte records — one label byte (0-9), then a 32x32 image
// as 1024 red, 1024 green and 1024 blue bytes, row-major.
// The reference split: the first (50,000 - val_size) training images train, the last val_size
// validate; test_batch.bin tests. Images are scaled to [0, 1] and resized to the model's size.
#pragma once

#include <string>

#include "trainyard/dataset.h"

namespace trainyard {

struct Cifar10Options {
  std::string root;
  int64_t val_size = 5000;
  int64_t image_size = 0;  // 0: the model's image_size
  std::string normalize = "none";
  std::string augment = "none";
};

// Reads one CIFAR-10 binary file into `images` (uint8 [N, 3, 32, 32]) and `labels` (int64 [N]).
// Throws UserError naming the file on a missing, empty, truncated or malformed file.
void read_cifar10_file(const std::string& path, torch::Tensor& images, torch::Tensor& labels);

void register_cifar10(Registry& registry);

}  // namespace trainyard
