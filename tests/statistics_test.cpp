// The test behind the report's verdicts against scipy: Welch's t-test — difference, 95% interval,
// p-value, degrees of freedom — on 123 cases tests/fixtures/make_welch_fixture.py made with
// scipy.stats.ttest_ind(equal_var=False), and Student's t quantiles.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "reports/statistics.h"

namespace trainyard {
namespace {

TEST(StatisticsTest, WelchTestIsScipys) {
  std::ifstream in(std::string(TRAINYARD_SOURCE_DIR) + "/tests/fixtures/welch_cases.json");
  const nlohmann::json fixture = nlohmann::json::parse(in);
  ASSERT_GE(fixture["cases"].size(), 100u);
  for (const auto& c : fixture["cases"]) {
    SCOPED_TRACE(c.dump().substr(0, 200));
    const auto test =
        welch_t_test(c["a"].get<std::vector<double>>(), c["b"].get<std::vector<double>>());
    ASSERT_TRUE(test.has_value());
    const double scale = std::abs(c["high"].get<double>() - c["low"].get<double>()) + 1e-12;
    EXPECT_NEAR(test->difference, c["difference"].get<double>(), 1e-9 * scale);
    EXPECT_NEAR(test->low, c["low"].get<double>(), 1e-7 * scale);
    EXPECT_NEAR(test->high, c["high"].get<double>(), 1e-7 * scale);
    EXPECT_NEAR(test->dof, c["dof"].get<double>(), 1e-7 * c["dof"].get<double>());
    EXPECT_NEAR(test->p_value, c["p_value"].get<double>(), 1e-7);
    EXPECT_EQ(test->significant(), c["p_value"].get<double>() < 0.05);
  }
}

TEST(StatisticsTest, StudentTQuantilesAreTheTables) {
  // Two-sided 95%: 12.706 (1 dof), 4.303 (2), 2.571 (5), 2.228 (10), 1.960 (normal).
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062047, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.30265273, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 5), 2.57058184, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.22813885, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 1e7), 1.95996398, 1e-5);
  EXPECT_NEAR(student_t_cdf(0, 3), 0.5, 1e-15);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -student_t_quantile(0.975, 4), 1e-12);
}

// The paired test is scipy's ttest_rel: on pairs (0, 1), (0, 2), (0, 3), t = 3.4641 with 2
// degrees of freedom, p = 0.0741799, and the interval of the mean difference at 95% is
// -0.48414-4.48414, at 97.5% -1.58266-5.58266 (scipy.stats.ttest_1samp(...).confidence_interval).
TEST(StatisticsTest, PairedTestIsScipys) {
  const auto test = paired_t_test({0, 0, 0}, {1, 2, 3});
  ASSERT_TRUE(test);
  EXPECT_DOUBLE_EQ(test->difference, 2);
  EXPECT_DOUBLE_EQ(test->dof, 2);
  EXPECT_NEAR(test->p_value, 0.07417990022744854, 1e-9);
  EXPECT_NEAR(test->low, -0.4841377117503298, 1e-9);
  EXPECT_NEAR(test->high, 4.48413771175033, 1e-9);
  EXPECT_FALSE(test->significant());
  const auto wider = paired_t_test({0, 0, 0}, {1, 2, 3}, family_level(2));
  EXPECT_NEAR(wider->low, -1.582658654962076, 1e-9);
  EXPECT_NEAR(wider->high, 5.582658654962084, 1e-9);
  // One pair is no test; pairs that all differ alike have no spread to judge the difference by
  // (the report then takes Welch's test); pairs that do not differ at all differ in nothing.
  EXPECT_FALSE(paired_t_test({1}, {2}));
  EXPECT_FALSE(paired_t_test({1, 5, 9}, {2, 6, 10}));
  const auto same = paired_t_test({1, 5, 9}, {1, 5, 9});
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->significant());
  EXPECT_DOUBLE_EQ(family_level(1), 0.95);
  EXPECT_DOUBLE_EQ(family_level(4), 1 - 0.05 / 4);
}

TEST(StatisticsTest, OneRunIsNoTestAndNoSpreadIsTheDifference) {
  EXPECT_FALSE(welch_t_test({1.0}, {2.0, 3.0}).has_value());
  const auto same = welch_t_test({2.0, 2.0}, {2.0, 2.0});
  ASSERT_TRUE(same);
  EXPECT_FALSE(same->significant());
  const auto apart = welch_t_test({2.0, 2.0}, {3.0, 3.0});
  ASSERT_TRUE(apart);
  EXPECT_TRUE(apart->significant());
  EXPECT_EQ(apart->difference, 1.0);
}

}  // namespace
}  // namespace trainyard
