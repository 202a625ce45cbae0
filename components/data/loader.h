// Iterates a dataset in batches without starving the trainer: background threads build the next
// batches while the current one trains, up to `prefetch` ahead, and deliver them in order. Training
// batches are shuffled per epoch with the run's seed (the last partial batch dropped, as the
// reference studies do); evaluation batches come in order, the last partial one kept.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "trainyard/dataset.h"

namespace trainyard {

struct LoaderOptions {
  bool shuffle = false;        // a new order every epoch (training), or the dataset's order
  bool drop_last = false;      // drop the last partial batch (training), or keep it
  int64_t workers = 2;         // threads building batches; 0 builds them in the training thread
  int64_t prefetch = 4;        // batches built ahead of the training loop
  bool pin_memory = false;     // page-locked host memory, so copies to the GPU run asynchronously
  BatchTransform transform{};  // applied to each batch in the workers (CPU runs); empty: none
  int rank = 0;                // this rank's share of every epoch: samples rank, rank + world, ...
  int world_size = 1;
};

class DataLoader {
 public:
  DataLoader(DatasetPtr dataset, int64_t batch_size, uint64_t seed, LoaderOptions options = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t num_batches() const;
  int64_t num_samples() const { return dataset_->size(); }

  // Starts delivering the first `batches` batches of `epoch` (reshuffled for it when shuffling),
  // from batch `first` on: a run continuing mid-epoch gets exactly the batches it had left.
  void start_epoch(int64_t epoch, int64_t batches, int64_t first = 0);
  // The next batch of the epoch, in order; blocks until it is built. Rethrows a worker's error.
  Batch next();

  // The seed of batch `index` of `epoch`: random augmentation is a function of it, so runs repeat.
  uint64_t batch_seed(int64_t epoch, int64_t index) const;

 private:
  Batch build(int64_t index) const;
  void stop_workers();
  void work();

  DatasetPtr dataset_;
  int64_t batch_size_;
  uint64_t seed_;
  LoaderOptions options_;

  std::vector<int64_t> order_;
  int64_t epoch_ = 0;
  int64_t batches_ = 0;    // in this epoch
  int64_t delivered_ = 0;  // batches handed to the trainer
  int64_t claimed_ = 0;    // batches a worker has started on
  bool stopping_ = false;
  std::map<int64_t, Batch> ready_;
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::thread> workers_;
};

}  // namespace trainyard
