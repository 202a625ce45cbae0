// The per-batch image work every image dataset shares. Datasets hand out uint8 images as stored;
// the transform turns a batch into model input — on the GPU for CUDA runs, in the loader's threads
// for CPU runs — so the per-pixel work is done once per batch by tensor kernels, never per sample.
#pragma once

#include <string>
#include <vector>

#include <torch/types.h>

#include "trainyard/dataset.h"

namespace trainyard {

struct ImageOptions {
  int64_t size = 0;                // resize to size x size; 0: keep
  std::string normalize = "none";  // none: pixels in [0, 1] (the studies); imagenet: mean/std
  std::string augment = "none";    // training only: none, flip, crop-flip (4-pixel padded crop)
};

// images uint8 [N, C, H, W] -> the rows at `indices`.
torch::Tensor gather_rows(const torch::Tensor& images, const std::vector<int64_t>& indices);

// uint8 -> float in [0, 1] -> (training) random crop and/or horizontal flip, decided by the batch's
// seed -> bilinear resize (align_corners=false, as torchvision's Resize) -> normalisation.
BatchTransform image_transform(const ImageOptions& options, bool training);

}  // namespace trainyard
