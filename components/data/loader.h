// Iterates a dataset in batches: shuffled per epoch with the run's seed for training, in order for
// evaluation. The last partial batch is dropped for training (as the reference studies do) and
// kept for evaluation.
#pragma once

#include <cstdint>
#include <vector>

#include "components/data/dataset.h"

namespace trainyard {

class DataLoader {
 public:
  DataLoader(DatasetPtr dataset, int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed);

  // Reshuffles (when shuffling) deterministically for `epoch`.
  void set_epoch(int64_t epoch);
  int64_t num_batches() const;
  int64_t num_samples() const { return dataset_->size(); }
  Batch batch(int64_t index) const;  // 0 <= index < num_batches()

 private:
  DatasetPtr dataset_;
  int64_t batch_size_;
  bool shuffle_;
  bool drop_last_;
  uint64_t seed_;
  std::vector<int64_t> order_;
};

}  // namespace trainyard
