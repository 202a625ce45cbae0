// Shared per-batch image work: gather uint8 images, scale to [0, 1] floats, resize.
#pragma once

#include <torch/types.h>

#include <vector>

namespace trainyard {

// images: uint8 [N, C, H, W]. Returns float [len(indices), C, size, size] in [0, 1], resized
// bilinearly (align_corners=false, as torchvision's Resize) when size differs from H or W.
torch::Tensor gather_images(const torch::Tensor& images, const std::vector<int64_t>& indices,
                            int64_t size);

}  // namespace trainyard
