// The background loader delivers exactly what a synchronous one would, in order, and passes a
// dataset's error to the training thread.
#include <filesystem>

#include <gtest/gtest.h>

#include "components/data/loader.h"
#include "trainyard/error.h"

namespace trainyard {
namespace {

// Example i is the number i; building a batch can be told to fail.
class Numbers : public Dataset {
 public:
  explicit Numbers(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  Batch get_batch(const std::vector<int64_t>& indices) const override {
    for (int64_t i : indices)
      if (i == fail_at_) throw UserError("broken example " + std::to_string(i));
    auto t = torch::tensor(indices, torch::kLong);
    return {t.to(torch::kFloat), t, {}};
  }

 private:
  int64_t n_, fail_at_;
};

std::vector<int64_t> epoch_of(DataLoader& loader, int64_t epoch) {
  std::vector<int64_t> seen;
  loader.start_epoch(epoch, loader.num_batches());
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    Batch batch = loader.next();
    for (int64_t i = 0; i < batch.size(); ++i) seen.push_back(batch.targets[i].item<int64_t>());
  }
  return seen;
}

TEST(LoaderTest, WorkersDeliverTheSameBatchesInOrder) {
  auto data = std::make_shared<Numbers>(103);
  DataLoader sync(data, 8, 5, {.shuffle = true, .drop_last = true, .workers = 0, .prefetch = 1});
  DataLoader async(data, 8, 5, {.shuffle = true, .drop_last = true, .workers = 3, .prefetch = 2});
  EXPECT_EQ(sync.num_batches(), 12);  // the last 7 dropped
  for (int64_t epoch = 0; epoch < 3; ++epoch)
    EXPECT_EQ(epoch_of(sync, epoch), epoch_of(async, epoch));
  EXPECT_NE(epoch_of(sync, 0), epoch_of(sync, 1));  // reshuffled each epoch
}

TEST(LoaderTest, EvaluationKeepsOrderAndTheLastPartialBatch) {
  DataLoader loader(std::make_shared<Numbers>(10), 4, 0, {.workers = 2, .prefetch = 4});
  EXPECT_EQ(loader.num_batches(), 3);
  std::vector<int64_t> expected = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(epoch_of(loader, 0), expected);
}

TEST(LoaderTest, TransformRunsInTheWorkersWithTheBatchSeed) {
  LoaderOptions options{.workers = 2, .prefetch = 2, .transform = [](Batch batch, uint64_t seed) {
                          batch.inputs = batch.inputs * 0 + static_cast<double>(seed % 1000);
                          return batch;
                        }};
  DataLoader loader(std::make_shared<Numbers>(16), 4, 9, options);
  loader.start_epoch(2, 4);
  for (int64_t b = 0; b < 4; ++b)
    EXPECT_EQ(loader.next().inputs[0].item<float>(),
              static_cast<float>(loader.batch_seed(2, b) % 1000));
}

TEST(LoaderTest, AWorkersErrorReachesTheTrainer) {
  DataLoader loader(std::make_shared<Numbers>(40, 21), 4, 0, {.workers = 2, .prefetch = 2});
  loader.start_epoch(0, 10);
  EXPECT_THROW(
      {
        for (int i = 0; i < 10; ++i) loader.next();
      },
      UserError);
  loader.start_epoch(1, 2);  // a new epoch starts cleanly
  EXPECT_EQ(loader.next().size(), 4);
}

// The kernel lists each live thread of the process under /proc/self/task.
int64_t live_threads() {
  const std::filesystem::path tasks("/proc/self/task");
  return std::distance(std::filesystem::directory_iterator(tasks),
                       std::filesystem::directory_iterator());
}

TEST(LoaderTest, StoppingMidEpochJoinsTheWorkers) {
  const LoaderOptions options{.shuffle = true, .drop_last = true, .workers = 2, .prefetch = 8};
  {
    DataLoader warm_up(std::make_shared<Numbers>(16), 4, 0, options);
    epoch_of(warm_up, 0);  // whatever LibTorch starts lazily (thread pools) starts here
  }
  const int64_t before = live_threads();
  auto loader = std::make_unique<DataLoader>(std::make_shared<Numbers>(1000), 4, 0, options);
  loader->start_epoch(0, loader->num_batches());
  loader->next();
  EXPECT_EQ(live_threads(), before + 2);  // both workers busy, 248 batches still to build
  loader.reset();                         // mid-epoch: the destructor stops and joins them
  EXPECT_EQ(live_threads(), before);
}

}  // namespace
}  // namespace trainyard
