#include "components/data/loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <ATen/Parallel.h>

namespace trainyard {

std::vector<int64_t> index_range(int64_t begin, int64_t end) {
  std::vector<int64_t> indices(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
  std::iota(indices.begin(), indices.end(), begin);
  return indices;
}

DataLoader::DataLoader(DatasetPtr dataset, int64_t batch_size, uint64_t seed, LoaderOptions options)
    : dataset_(std::move(dataset)),
      batch_size_(batch_size),
      seed_(seed),
      options_(std::move(options)) {}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::num_batches() const {
  // Every rank gets the same number of samples (as DistributedSampler with drop_last).
  int64_t n = dataset_->size() / options_.world_size;
  return options_.drop_last ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

uint64_t DataLoader::batch_seed(int64_t epoch, int64_t index) const {
  return (seed_ * 1000003u + static_cast<uint64_t>(epoch)) * 1000003u +
         static_cast<uint64_t>(index);
}

void DataLoader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

void DataLoader::start_epoch(int64_t epoch, int64_t batches, int64_t first) {
  stop_workers();
  order_ = index_range(0, dataset_->size());
  if (options_.shuffle) {  // the same permutation on every rank: the seed is the run's
    std::mt19937_64 generator(seed_ * 1000003u + static_cast<uint64_t>(epoch));
    std::shuffle(order_.begin(), order_.end(), generator);
  }
  if (options_.world_size > 1) {
    // Rank r takes samples r, r + world, ...: step k's batches over all ranks are the
    // consecutive samples a single process with the global batch would take.
    std::vector<int64_t> mine;
    const int64_t per_rank = dataset_->size() / options_.world_size;
    for (int64_t i = 0; i < per_rank; ++i)
      mine.push_back(order_[static_cast<size_t>(i * options_.world_size + options_.rank)]);
    order_ = std::move(mine);
  }
  epoch_ = epoch;
  batches_ = std::min(batches, num_batches());
  delivered_ = claimed_ = std::clamp<int64_t>(first, 0, batches_);
  ready_.clear();
  error_ = nullptr;
  stopping_ = false;
  for (int64_t w = 0; w < options_.workers; ++w) workers_.emplace_back([this] { work(); });
}

Batch DataLoader::build(int64_t index) const {
  auto begin = order_.begin() + index * batch_size_;
  auto end = order_.begin() +
             std::min<int64_t>((index + 1) * batch_size_, static_cast<int64_t>(order_.size()));
  Batch batch = dataset_->get_batch(std::vector<int64_t>(begin, end));
  if (options_.transform) batch = options_.transform(std::move(batch), batch_seed(epoch_, index));
  if (options_.pin_memory) {
    batch.inputs = batch.inputs.pin_memory();
    batch.targets = batch.targets.pin_memory();
    if (batch.attention_mask.defined()) batch.attention_mask = batch.attention_mask.pin_memory();
  }
  return batch;
}

void DataLoader::work() {
  // One thread per worker: a worker's own tensor work must not fan out over the cores the training
  // step is using (OpenMP's thread count is per calling thread, so this leaves the trainer's
  // alone).
  at::set_num_threads(1);
  while (true) {
    int64_t index;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] {
        return stopping_ || claimed_ >= batches_ || claimed_ < delivered_ + options_.prefetch;
      });
      if (stopping_ || claimed_ >= batches_ || error_) return;
      index = claimed_++;
    }
    try {
      Batch batch = build(index);
      std::lock_guard lock(mutex_);
      ready_.emplace(index, std::move(batch));
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

Batch DataLoader::next() {
  if (options_.workers == 0) return build(delivered_++);
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return error_ || ready_.count(delivered_) > 0; });
  if (error_) std::rethrow_exception(error_);
  Batch batch = std::move(ready_.at(delivered_));
  ready_.erase(delivered_++);
  lock.unlock();
  changed_.notify_all();
  return batch;
}

}  // namespace trainyard
