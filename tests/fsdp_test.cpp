// fsdp end to end: parameters, gradients and optimizer state sharded; a block's parameters are
// gathered just before it runs.
#include <gtest/gtest.h>

#include "tests/strategy_cli.h"

namespace trainyard {
namespace {

class FsdpTest : public testing::CliTest {};

// Also with the parameters kept gathered between forward and backward (reshard_after_forward:
// false).
TEST_F(FsdpTest, OnTwoAndFourRanksMatchesOneProcessWithTheGlobalBatch) {
  testing::expect_ranks_match_one_process(
      dir, db(), "fsdp", {.parameters = true, .gradients_and_optimizer_state = true},
      {"{name: fsdp-2-keep-gathered, set: {runtime.strategy: {name: fsdp, reshard_after_forward: "
       "false}, "
       "runtime.devices: 2, train.batch_size: 8}}"});
}

// In fp32 with accumulation and clipping, 2 fsdp ranks train as one process with the same global
// batch.
TEST_F(FsdpTest, ComposesWithPrecisionsAccumulationAndClipping) {
  auto losses = testing::expect_composes_with_precisions(
      dir, db(), "fsdp", {"{name: fsdp, set: {runtime.strategy: fsdp}}"});
  ASSERT_TRUE(losses.count("fsdp") && losses.count("single-8"));
  EXPECT_NEAR(losses.at("fsdp"), losses.at("single-8"), 1e-4);
}

}  // namespace
}  // namespace trainyard
