// A deterministic image-classification dataset generated in memory: each class has a fixed random
// pattern, and each image is its class's pattern plus noise. A small model learns it in seconds,
// so the quickstart and the tests train for real without downloads.
#pragma once

#include "trainyard/dataset.h"

namespace trainyard {

struct SyntheticImagesOptions {
  int64_t train_size = 1024;
  int64_t val_size = 256;
  int64_t test_size = 256;
  int64_t num_classes = 10;
  int64_t image_size = 0;  // 0: the model's image_size
  int64_t source_size =
      0;  // generate at this size and resize per batch (as CIFAR-10 32 -> 224); 0: image_size
  double noise = 0.5;  // standard deviation of the per-pixel noise
  int64_t seed = 0;    // seed of the patterns and noise (not the run's seed: data stay fixed)
};

void register_synthetic_images(Registry& registry);

}  // namespace trainyard
