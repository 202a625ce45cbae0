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

TEST_F(FsdpTest, ComposesWithPrecisionsAccumulationAndClipping) {
  testing::expect_composes_with_precisions(dir, db(), "fsdp");
}

}  // namespace
}  // namespace trainyard
