#include "reports/statistics.h"

#include <algorithm>

#include <cmath>
#include <limits>

namespace trainyard {

namespace {

// The continued fraction of the regularised incomplete beta function (modified Lentz's method, as
// Numerical Recipes' betacf); converges fast for x < (a + 1) / (a + b + 2).
double beta_continued_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEpsilon = 1e-15;
  auto guard = [](double v) { return std::abs(v) < kTiny ? kTiny : v; };
  double c = 1, d = 1 / guard(1 - (a + b) * x / (a + 1));
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    const double even = m * (b - m) * x / ((a - 1 + m2) * (a + m2));
    d = 1 / guard(1 + even * d);
    c = guard(1 + even / c);
    h *= d * c;
    const double odd = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2));
    d = 1 / guard(1 + odd * d);
    c = guard(1 + odd / c);
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < kEpsilon) break;
  }
  return h;
}

// I_x(a, b), the regularised incomplete beta function.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double variance_of(const std::vector<double>& v, double mean) {  // unbiased (n - 1)
  double sum = 0;
  for (double x : v) sum += (x - mean) * (x - mean);
  return sum / static_cast<double>(v.size() - 1);
}

}  // namespace

double student_t_cdf(double t, double dof) {
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  const double tail = 0.5 * incomplete_beta(dof / 2, 0.5, dof / (dof + t * t));  // P(T > |t|)
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double dof) {
  if (p <= 0) return -std::numeric_limits<double>::infinity();
  if (p >= 1) return std::numeric_limits<double>::infinity();
  if (p < 0.5) return -student_t_quantile(1 - p, dof);
  double low = 0, high = 1;
  while (student_t_cdf(high, dof) < p) high *= 2;  // heavy tails: bracket first
  for (int i = 0; i < 200 && high - low > 1e-12 * std::max(1.0, high); ++i) {
    const double middle = (low + high) / 2;
    (student_t_cdf(middle, dof) < p ? low : high) = middle;
  }
  return (low + high) / 2;
}

std::optional<WelchTest> welch_t_test(const std::vector<double>& a, const std::vector<double>& b,
                                      double level) {
  if (a.size() < 2 || b.size() < 2) return std::nullopt;
  const double mean_a = mean_of(a), mean_b = mean_of(b);
  const double va = variance_of(a, mean_a) / static_cast<double>(a.size());
  const double vb = variance_of(b, mean_b) / static_cast<double>(b.size());
  WelchTest test;
  test.difference = mean_b - mean_a;
  const double se = std::sqrt(va + vb);
  if (se == 0) {  // no spread on either side: the difference is all there is
    test.low = test.high = test.difference;
    test.p_value = test.difference == 0 ? 1 : 0;
    test.dof = static_cast<double>(a.size() + b.size() - 2);
    return test;
  }
  test.dof =
      (va + vb) * (va + vb) /
      (va * va / static_cast<double>(a.size() - 1) + vb * vb / static_cast<double>(b.size() - 1));
  const double t = test.difference / se;
  test.p_value = 2 * student_t_cdf(-std::abs(t), test.dof);
  const double margin = student_t_quantile(0.5 + level / 2, test.dof) * se;
  test.low = test.difference - margin;
  test.high = test.difference + margin;
  return test;
}

std::optional<WelchTest> paired_t_test(const std::vector<double>& a, const std::vector<double>& b,
                                       double level) {
  if (a.size() != b.size() || a.size() < 2) return std::nullopt;
  std::vector<double> differences;
  for (size_t i = 0; i < a.size(); ++i) differences.push_back(b[i] - a[i]);
  const double mean = mean_of(differences);
  const double se =
      std::sqrt(variance_of(differences, mean) / static_cast<double>(differences.size()));
  WelchTest test;
  test.difference = mean;
  test.dof = static_cast<double>(differences.size() - 1);
  if (se == 0) {  // every pair differs alike: nothing to tell the noise by, unless no pair differs
    if (mean != 0) return std::nullopt;
    test.p_value = 1;
    return test;
  }
  test.p_value = 2 * student_t_cdf(-std::abs(mean / se), test.dof);
  const double margin = student_t_quantile(0.5 + level / 2, test.dof) * se;
  test.low = mean - margin;
  test.high = mean + margin;
  return test;
}

double family_level(size_t comparisons) {
  return 1 - (1 - kVerdictLevel) / static_cast<double>(std::max<size_t>(comparisons, 1));
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

bool dominates(std::pair<double, double> a, std::pair<double, double> b) {
  const bool a_known = !std::isnan(a.first) && !std::isnan(a.second);
  const bool b_known = !std::isnan(b.first) && !std::isnan(b.second);
  if (!a_known || !b_known) return a_known && !b_known;
  return a.first <= b.first && a.second <= b.second && (a.first < b.first || a.second < b.second);
}

std::vector<size_t> pareto_front(const std::vector<std::pair<double, double>>& points) {
  std::vector<size_t> front;
  for (size_t i = 0; i < points.size(); ++i) {
    if (std::isnan(points[i].first) || std::isnan(points[i].second)) continue;
    bool dominated = false;
    for (size_t j = 0; j < points.size() && !dominated; ++j)
      dominated = j != i && dominates(points[j], points[i]);
    if (!dominated) front.push_back(i);
  }
  return front;
}

std::vector<size_t> nondomination_ranks(const std::vector<std::pair<double, double>>& points) {
  std::vector<size_t> rank(points.size(), 0);
  std::vector<size_t> left(points.size());
  for (size_t i = 0; i < left.size(); ++i) left[i] = i;
  for (size_t r = 0; !left.empty(); ++r) {
    std::vector<std::pair<double, double>> rest;
    for (size_t i : left) rest.push_back(points[i]);
    std::vector<size_t> front = pareto_front(rest);
    if (front.empty()) {  // only NaN points left: the last rank
      for (size_t i : left) rank[i] = r;
      break;
    }
    std::vector<size_t> next;
    size_t f = 0;
    for (size_t k = 0; k < left.size(); ++k)
      if (f < front.size() && front[f] == k) {
        rank[left[k]] = r;
        ++f;
      } else {
        next.push_back(left[k]);
      }
    left = std::move(next);
  }
  return rank;
}

}  // namespace trainyard
