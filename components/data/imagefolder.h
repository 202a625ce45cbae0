// Your own images, one folder per class, as torchvision's ImageFolder:
//   root/train/<class>/*.jpg|png   root/val/<class>/...   root/test/<class>/... (optional)
// Without val/, val_fraction holds out that share of each class of train/ (seeded) instead.
// Classes are the sorted folder names under train/. Images are decoded (libjpeg-turbo, libpng) and
// resized to the model's size in the loader's threads, so any image size works; the remaining
// per-batch work (scaling, normalisation, augmentation) runs on the training device.
#pragma once

#include <string>
#include <vector>

#include "trainyard/dataset.h"

namespace trainyard {

struct ImageFolderOptions {
  std::string root;
  int64_t image_size = 0;  // 0: the model's image_size
  std::string normalize = "imagenet";
  std::string augment = "none";
  double val_fraction = 0;  // > 0: validation images held out of train/, when there is no val/
  int64_t seed = 0;         // of that split: the same for every run
};

// The val_fraction split of train/'s images, given each one's class: which go to validation. Of
// each class round(fraction x its images), at least one, leaving at least one to train on, chosen
// by a seeded shuffle (mt19937_64, the same on every machine).
std::vector<bool> held_out_for_validation(const std::vector<int64_t>& labels, double fraction,
                                          int64_t seed);

void register_imagefolder(Registry& registry);

}  // namespace trainyard
