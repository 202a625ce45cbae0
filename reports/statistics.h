// The test behind the report's verdicts: is a variant's difference from the baseline beyond the
// noise of its repeats? Welch's two-sample t-test (unequal variances, Welch–Satterthwaite degrees
// of freedom) at the 95% level — on log training time, so that a time's difference is a ratio
// (speedup) with a confidence interval, and on accuracy as it is. It needs two runs of each side;
// with one the spread is unknown and the report says so instead of claiming anything.
// tests/fixtures/make_welch_fixture.py checks it against scipy.stats.ttest_ind(equal_var=False).
#pragma once

#include <optional>
#include <utility>
#include <vector>

namespace trainyard {

inline constexpr double kVerdictLevel = 0.95;

struct WelchTest {
  double difference = 0;     // mean(b) - mean(a)
  double low = 0, high = 0;  // its confidence interval at `level`
  double p_value = 1;        // two-sided
  double dof = 0;            // Welch–Satterthwaite degrees of freedom
  // The interval excludes 0: the difference is beyond noise at `level`.
  bool significant() const { return low > 0 || high < 0; }
};

// Welch's t-test of b against a; nullopt when either has fewer than two values. Equal samples
// without spread give an interval of the difference alone (significant when it is not 0).
std::optional<WelchTest> welch_t_test(const std::vector<double>& a, const std::vector<double>& b,
                                      double level = kVerdictLevel);

// The paired t-test of b against a, pair i being (a[i], b[i]): Student's t on the differences
// b[i] - a[i], n - 1 degrees of freedom (scipy.stats.ttest_rel), in the same figures as Welch's.
// What the report uses when the two sides ran in the same rounds of a batch (sweep.order:
// interleaved): a drift between rounds falls on both runs of a pair and cancels. nullopt without
// two pairs, or when every pair differs by the same non-zero amount (no spread to judge it by: a
// step of a small test set's accuracy, say).
std::optional<WelchTest> paired_t_test(const std::vector<double>& a, const std::vector<double>& b,
                                       double level = kVerdictLevel);

// The level of each of `comparisons` tests that together are wrong at most 1 - kVerdictLevel of
// the time (Bonferroni): with two variants against a baseline, each is tested at 1 - 0.05/2.
// Their intervals are at the same level, so an interval and its verdict always agree.
double family_level(size_t comparisons);

// The median of a non-empty list (the mean of the middle two when their number is even).
double median(std::vector<double> values);

// Two objectives, both lower-is-better (negate one that is not): whether point a dominates b (no
// worse in both, better in one). A point with a NaN is dominated by any without.
bool dominates(std::pair<double, double> a, std::pair<double, double> b);
// The points no other point dominates, in their order (a NaN point never; equal points both).
std::vector<size_t> pareto_front(const std::vector<std::pair<double, double>>& points);
// Each point's nondomination rank: 0 for the front, 1 for the front of the rest, ...
std::vector<size_t> nondomination_ranks(const std::vector<std::pair<double, double>>& points);

// Student's t distribution with `dof` degrees of freedom: P(T <= t), and its inverse.
double student_t_cdf(double t, double dof);
double student_t_quantile(double p, double dof);

}  // namespace trainyard
