// zero2 end to end: parameters replicated, gradients and optimizer state sharded over the ranks.
#include <gtest/gtest.h>

#include "db/store.h"
#include "tests/strategy_cli.h"

namespace trainyard {
namespace {

class Zero2Test : public testing::CliTest {};

// Buckets of 10 KB: several per model, so the in-order launching of buckets is exercised.
TEST_F(Zero2Test, OnTwoAndFourRanksMatchesOneProcessWithTheGlobalBatch) {
  testing::expect_ranks_match_one_process(
      dir, db(), "zero2", {.parameters = false, .gradients_and_optimizer_state = true},
      {"{name: zero2-4-small-buckets, set: {runtime.strategy: {name: zero2, bucket_mb: 0.01}, "
       "runtime.devices: 4, "
       "train.batch_size: 4}}"});
}

// The gradients can be averaged in bfloat16 (reduce_dtype), and the run records that it was.
TEST_F(Zero2Test, ComposesWithPrecisionsAccumulationAndClipping) {
  testing::expect_composes_with_precisions(dir, db(), "zero2",
                                           {"{name: zero2-bf16-reduce, set: {runtime.strategy: "
                                            "{name: zero2, reduce_dtype: bfloat16}}}"});
  Store store(db());
  auto runs = store.runs("compose");
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(store.attributes(runs.back().id).at("reduce_dtype"), "BFloat16");
}

}  // namespace
}  // namespace trainyard
