#include "components/data/loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <ATen/ATen.h>

#include "components/data/image_batch.h"

namespace trainyard {

std::vector<int64_t> index_range(int64_t begin, int64_t end) {
  std::vector<int64_t> indices(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
  std::iota(indices.begin(), indices.end(), begin);
  return indices;
}

torch::Tensor gather_images(const torch::Tensor& images, const std::vector<int64_t>& indices,
                            int64_t size) {
  auto index = torch::tensor(indices, torch::kLong);
  auto batch = images.index_select(0, index).to(torch::kFloat).div_(255.0);
  if (size > 0 && (batch.size(2) != size || batch.size(3) != size))
    batch = at::upsample_bilinear2d(batch, {size, size}, /*align_corners=*/false);
  return batch;
}

DataLoader::DataLoader(DatasetPtr dataset, int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed)
    : dataset_(std::move(dataset)), batch_size_(batch_size), shuffle_(shuffle), drop_last_(drop_last),
      seed_(seed), order_(index_range(0, dataset_->size())) {
  set_epoch(0);
}

void DataLoader::set_epoch(int64_t epoch) {
  order_ = index_range(0, dataset_->size());
  if (shuffle_) {
    std::mt19937_64 generator(seed_ * 1000003 + static_cast<uint64_t>(epoch));
    std::shuffle(order_.begin(), order_.end(), generator);
  }
}

int64_t DataLoader::num_batches() const {
  int64_t n = dataset_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

Batch DataLoader::batch(int64_t index) const {
  auto begin = order_.begin() + index * batch_size_;
  auto end = order_.begin() + std::min<int64_t>((index + 1) * batch_size_, dataset_->size());
  return dataset_->get_batch(std::vector<int64_t>(begin, end));
}

}  // namespace trainyard
