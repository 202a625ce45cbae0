// ddp end to end: every rank holds the whole model, gradients are averaged while backward runs.
#include <gtest/gtest.h>

#include "tests/strategy_cli.h"

namespace trainyard {
namespace {

class DdpTest : public testing::CliTest {};

// Buckets of 10 KB: several per model, so the in-order launching of buckets is exercised.
TEST_F(DdpTest, OnTwoAndFourRanksMatchesOneProcessWithTheGlobalBatch) {
  testing::expect_ranks_match_one_process(
      dir, db(), "ddp", {.parameters = false, .gradients_and_optimizer_state = false},
      {"{name: ddp-4-small-buckets, set: {runtime.strategy: {name: ddp, bucket_mb: 0.01}, "
       "runtime.devices: 4, "
       "train.batch_size: 4}}"});
}

TEST_F(DdpTest, ComposesWithPrecisionsAccumulationAndClipping) {
  testing::expect_composes_with_precisions(dir, db(), "ddp");
}

}  // namespace
}  // namespace trainyard
