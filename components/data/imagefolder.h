// Your own images, one folder per class, as torchvision's ImageFolder:
//   root/train/<class>/*.jpg|png   root/val/<class>/...   root/test/<class>/... (optional)
// Classes are the sorted folder names under train/. Images are decoded (libjpeg-turbo, libpng) and
// resized to the model's size in the loader's threads, so any image size works; the remaining
// per-batch work (scaling, normalisation, augmentation) runs on the training device.
#pragma once

#include <string>

#include "components/data/dataset.h"

namespace trainyard {

struct ImageFolderOptions {
  std::string root;
  int64_t image_size = 0;  // 0: the model's image_size
  std::string normalize = "imagenet";
  std::string augment = "none";
};

void register_imagefolder(Registry& registry);

}  // namespace trainyard
