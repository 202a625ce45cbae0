#include <gtest/gtest.h>

#include "components/builtin.h"
#include "trainyard/schedulers.h"

namespace trainyard {
namespace {

LrSchedule schedule(const std::string& name, const std::string& options, int64_t total_steps) {
  ComponentChoice choice{.name = name};
  flatten_into(choice.options, YAML::Load(options), "t");
  return build_schedule(builtin_registry(), choice, {.total_steps = total_steps});
}

TEST(SchedulersTest, WarmupRisesLinearlyToTheBaseRate) {
  auto s = schedule("none", "{warmup_steps: 3}", 10);
  EXPECT_DOUBLE_EQ(s(0), 0.25);
  EXPECT_DOUBLE_EQ(s(2), 0.75);
  EXPECT_DOUBLE_EQ(s(3), 1.0);
  EXPECT_DOUBLE_EQ(s(9), 1.0);
}

TEST(SchedulersTest, StepAndExponentialDecay) {
  auto step = schedule("step", "{step_size: 2, gamma: 0.5}", 10);
  EXPECT_DOUBLE_EQ(step(1), 1.0);
  EXPECT_DOUBLE_EQ(step(2), 0.5);
  EXPECT_DOUBLE_EQ(step(5), 0.25);
  auto exponential = schedule("exponential", "{gamma: 0.9}", 10);
  EXPECT_NEAR(exponential(2), 0.81, 1e-12);
}

TEST(SchedulersTest, CosineEndsAtTheMinimumAfterWarmup) {
  auto s = schedule("cosine", "{warmup_steps: 2, min_lr_ratio: 0.1}", 12);
  EXPECT_DOUBLE_EQ(s(2), 1.0);     // start of the decay
  EXPECT_NEAR(s(7), 0.55, 1e-12);  // halfway: (1 + 0.1) / 2
  EXPECT_NEAR(s(12), 0.1, 1e-12);  // the end
}

}  // namespace
}  // namespace trainyard
