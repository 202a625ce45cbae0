// The dataset seam. A dataset yields collated batches on the CPU; splits are views of one.
// Each dataset is one file that registers itself in components/builtin.cpp.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainyard/batch.h"
#include "trainyard/error.h"
#include "trainyard/registry.h"

// Exported by trainyard-engine to the plugins it loads (the rest of trainyard is hidden).
#pragma GCC visibility push(default)

namespace trainyard {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The examples at `indices`, collated into one batch (CPU tensors). Thread-safe.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const = 0;
};

using DatasetPtr = std::shared_ptr<const Dataset>;

// Per-batch work a dataset asks for (decode, resize, normalise, augment), done where it is
// cheapest: on the GPU after the copy for CUDA runs, in the loader's threads for CPU runs. `seed`
// is the batch's own (DataLoader::batch_seed), so random augmentation repeats run to run.
using BatchTransform = std::function<Batch(Batch batch, uint64_t seed)>;

// The three splits the engine trains, validates and tests on.
struct DataSplits {
  DatasetPtr train;
  DatasetPtr validation;
  DatasetPtr test;
  int64_t num_classes = 0;
  int64_t vocab_size = 0;          // of the tokenizer, for text; 0 for images
  BatchTransform train_transform;  // empty: batches are model input as they are
  BatchTransform eval_transform;
  // What the run's details list about the data beyond its options: the classes' names, how the
  // splits were made ("dataset_classes": "negative=0, positive=1").
  std::map<std::string, std::string> details{};
  // Training batches in the dataset's own order rather than shuffled each epoch (the tokens
  // dataset's sampler: sequential).
  bool train_in_order = false;
};

// What a dataset learns from the rest of the run when it is built.
struct DataContext {
  int64_t image_size = 0;     // the model's input resolution; 0 when the model has none
  int64_t max_positions = 0;  // the model's longest sequence; 0 when the model has none
  int64_t vocab_size = 0;     // the model's token embeddings; 0 when the model has none
  std::function<void(const std::string&)> log{};  // progress worth a line in the run's log

  // Refuses, as dataset `dataset`, samples of `length` tokens (option `key`) this model cannot
  // read (sequence_beyond_model, registry.h).
  void check_sequence_fits(const std::string& dataset, const std::string& key,
                           int64_t length) const {
    if (const std::string problem = sequence_beyond_model(key, length, max_positions);
        !problem.empty())
      throw UserError(dataset + ": " + problem);
  }
};

inline DataSplits build_dataset(const Registry& registry, const ComponentChoice& choice,
                                const DataContext& context) {
  return registry.build<DataSplits(const DataContext&)>(ComponentKind::dataset, choice.name,
                                                        choice.options, context);
}

// A view of `base` through a list of indices: how a split is carved out of a file's examples.
class Subset : public Dataset {
 public:
  Subset(DatasetPtr base, std::vector<int64_t> indices)
      : base_(std::move(base)), indices_(std::move(indices)) {}
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Batch get_batch(const std::vector<int64_t>& indices) const override {
    std::vector<int64_t> mapped;
    mapped.reserve(indices.size());
    for (int64_t i : indices) mapped.push_back(indices_.at(static_cast<size_t>(i)));
    return base_->get_batch(mapped);
  }

 private:
  DatasetPtr base_;
  std::vector<int64_t> indices_;
};

// Indices [begin, end).
std::vector<int64_t> index_range(int64_t begin, int64_t end);

}  // namespace trainyard
#pragma GCC visibility pop
