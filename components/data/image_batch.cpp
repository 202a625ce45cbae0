#include "components/data/image_batch.h"

#include <ATen/ATen.h>

namespace trainyard {

torch::Tensor gather_rows(const torch::Tensor& images, const std::vector<int64_t>& indices) {
  return images.index_select(0, torch::tensor(indices, torch::kLong));
}

namespace {

// A small CPU tensor on `device` without stalling the host: on CUDA a plain copy from pageable
// memory synchronises the stream, so it goes through pinned memory, asynchronously.
torch::Tensor to_device(const torch::Tensor& host, const torch::Device& device) {
  if (device.is_cpu()) return host;
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

// Random decisions are drawn on the CPU from the batch's seed and applied wherever the batch is.
torch::Tensor augment(torch::Tensor x, const std::string& mode, uint64_t seed) {
  const int64_t n = x.size(0), h = x.size(2), w = x.size(3);
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  if (mode == "crop-flip") {
    constexpr int64_t pad = 4;
    auto padded = at::reflection_pad2d(x, {pad, pad, pad, pad});
    auto offsets = torch::randint(0, 2 * pad + 1, {n, 2}, generator, torch::kLong);
    auto o = offsets.accessor<int64_t, 2>();
    std::vector<torch::Tensor> crops;
    for (int64_t i = 0; i < n; ++i)
      crops.push_back(padded[i].narrow(1, o[i][0], h).narrow(2, o[i][1], w));
    x = torch::stack(crops);
  }
  auto flip = to_device(torch::rand({n}, generator).lt(0.5), x.device()).view({n, 1, 1, 1});
  return torch::where(flip, x.flip(3), x);
}

}  // namespace

BatchTransform image_transform(const ImageOptions& options, bool training) {
  return [options, training](Batch batch, uint64_t seed) {
    auto x = batch.inputs.to(torch::kFloat).div_(255.0);
    if (training && options.augment != "none") x = augment(x, options.augment, seed);
    if (options.size > 0 && (x.size(2) != options.size || x.size(3) != options.size))
      x = at::upsample_bilinear2d(x, {options.size, options.size}, /*align_corners=*/false);
    if (options.normalize == "imagenet") {
      auto mean = to_device(torch::tensor({0.485f, 0.456f, 0.406f}), x.device()).view({1, 3, 1, 1});
      auto std = to_device(torch::tensor({0.229f, 0.224f, 0.225f}), x.device()).view({1, 3, 1, 1});
      x = (x - mean) / std;
    }
    batch.inputs = x;
    return batch;
  };
}

}  // namespace trainyard
