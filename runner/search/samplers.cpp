#include "runner/search/samplers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace trainyard {

namespace {

constexpr double kPi = 3.14159265358979323846;

// SplitMix64 (Steele, Lea and Flood 2014): small, fast, and the same numbers everywhere.
class Random {
 public:
  explicit Random(uint64_t state) : state_(state) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {                                                           // Box–Muller
    const double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * kPi * v);
  }

 private:
  uint64_t state_;
};

// The stream of one parameter of one trial of one study.
Random stream(uint64_t seed, int64_t index, size_t parameter, uint64_t purpose) {
  Random mix(seed * 0x2545f4914f6cdd1dULL + static_cast<uint64_t>(index));
  uint64_t state = mix.next() ^ (static_cast<uint64_t>(parameter) * 0x9e3779b97f4a7c15ULL);
  state ^= purpose * 0xd1b54a32d192ed03ULL;
  return Random(Random(state).next());
}

double from_unit(const SearchParameter& p, double u) {
  switch (p.distribution) {
    case Distribution::uniform:
      return p.low + u * (p.high - p.low);
    case Distribution::log_uniform:
      return std::exp(std::log(p.low) + u * (std::log(p.high) - std::log(p.low)));
    case Distribution::int_uniform:
      return std::min(p.high, std::floor(p.low + u * (p.high - p.low + 1)));
    case Distribution::choice:
      return std::min(static_cast<double>(p.choices.size() - 1),
                      std::floor(u * static_cast<double>(p.choices.size())));
  }
  return 0;
}

// --- TPE's numeric parameters: a Parzen mixture of truncated Gaussians on [low, high], in the
// space the parameter is searched in (log for log_uniform; whole numbers widened by half a step
// each side, as Optuna's IntDistribution).
struct Parzen {
  std::vector<double> mus, sigmas, weights;
  double low = 0, high = 0;
};

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

Parzen parzen(std::vector<double> points, double low, double high) {
  Parzen p;
  p.low = low;
  p.high = high;
  const double prior_mu = 0.5 * (low + high), prior_sigma = high - low;
  points.push_back(prior_mu);
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return points[a] < points[b]; });
  std::vector<double> sorted;
  for (size_t i : order) sorted.push_back(points[i]);
  // Each point's bandwidth: the larger distance to its neighbours (the ends: their one neighbour),
  // clipped to [range / min(100, 1 + n), range].
  const size_t n = sorted.size();
  std::vector<double> sorted_sigma(n, prior_sigma);
  for (size_t i = 0; i < n && n > 1; ++i) {
    const double left = i > 0 ? sorted[i] - sorted[i - 1] : sorted[1] - sorted[0];
    const double right = i + 1 < n ? sorted[i + 1] - sorted[i] : sorted[n - 1] - sorted[n - 2];
    sorted_sigma[i] = std::max(left, right);
  }
  const double max_sigma = high - low;
  const double min_sigma = (high - low) / std::min(100.0, 1.0 + static_cast<double>(n));
  std::vector<double> sigma(n);
  for (size_t k = 0; k < n; ++k)
    sigma[order[k]] = std::clamp(sorted_sigma[k], min_sigma, max_sigma);
  sigma.back() = prior_sigma;  // the prior keeps the whole range
  p.mus = points;
  p.sigmas = sigma;
  p.weights.assign(n, 1.0 / static_cast<double>(n));
  return p;
}

double log_density(const Parzen& p, double x) {
  double total = 0;
  for (size_t i = 0; i < p.mus.size(); ++i) {
    const double s = p.sigmas[i];
    const double mass = normal_cdf((p.high - p.mus[i]) / s) - normal_cdf((p.low - p.mus[i]) / s);
    const double z = (x - p.mus[i]) / s;
    total +=
        p.weights[i] * std::exp(-0.5 * z * z) / (s * std::sqrt(2 * kPi) * std::max(mass, 1e-300));
  }
  return std::log(std::max(total, 1e-300));
}

double sample(const Parzen& p, Random& random) {
  double u = random.uniform(), acc = 0;
  size_t k = p.mus.size() - 1;
  for (size_t i = 0; i < p.mus.size(); ++i)
    if ((acc += p.weights[i]) > u) {
      k = i;
      break;
    }
  for (int tries = 0; tries < 100; ++tries) {  // the truncated Gaussian, by rejection
    const double x = p.mus[k] + p.sigmas[k] * random.normal();
    if (x >= p.low && x <= p.high) return x;
  }
  return std::clamp(p.mus[k], p.low, p.high);
}

// The space a numeric parameter is modelled in, and back.
double to_model(const SearchParameter& p, double value) {
  return p.distribution == Distribution::log_uniform ? std::log(value) : value;
}
double from_model(const SearchParameter& p, double x) {
  switch (p.distribution) {
    case Distribution::log_uniform:
      return std::clamp(std::exp(x), p.low, p.high);
    case Distribution::int_uniform:
      return std::clamp(std::round(x), p.low, p.high);
    default:
      return std::clamp(x, p.low, p.high);
  }
}
std::pair<double, double> model_range(const SearchParameter& p) {
  if (p.distribution == Distribution::log_uniform) return {std::log(p.low), std::log(p.high)};
  if (p.distribution == Distribution::int_uniform) return {p.low - 0.5, p.high + 0.5};
  return {p.low, p.high};
}

}  // namespace

bool better_figure(double a, double b, bool minimize) {
  if (!std::isfinite(a)) return false;
  if (!std::isfinite(b)) return true;
  return minimize ? a < b : a > b;
}

TrialValues propose_random(const std::vector<SearchParameter>& space, uint64_t seed,
                           int64_t index) {
  TrialValues values;
  for (size_t i = 0; i < space.size(); ++i) {
    Random random = stream(seed, index, i, /*purpose=*/1);
    values.push_back(from_unit(space[i], random.uniform()));
  }
  return values;
}

TrialValues propose_grid(const std::vector<SearchParameter>& space, int64_t index) {
  TrialValues values(space.size());
  for (size_t i = space.size(); i-- > 0;) {
    const auto size = static_cast<int64_t>(space[i].choices.size());
    values[i] = static_cast<double>(index % size);
    index /= size;
  }
  return values;
}

TrialValues propose_tpe(const std::vector<SearchParameter>& space, uint64_t seed, int64_t index,
                        const std::vector<Observation>& all, bool minimize) {
  // A failed trial tells nothing about where the good settings are (as Optuna, which leaves FAIL
  // trials out): only the finite figures count, for the start and the split.
  std::vector<Observation> observations;
  for (const Observation& o : all)
    if (std::isfinite(o.value)) observations.push_back(o);
  const auto n = static_cast<int64_t>(observations.size());
  if (n < kStartupTrials) return propose_random(space, seed, index);
  // The best gamma(n) are "good" (l), the rest "bad" (g); ties: the earlier trial.
  std::vector<size_t> ranked(observations.size());
  std::iota(ranked.begin(), ranked.end(), 0);
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    return better_figure(observations[a].value, observations[b].value, minimize);
  });
  const auto good_count = static_cast<size_t>(std::min<int64_t>((n + 9) / 10, 25));
  std::vector<bool> good(observations.size(), false);
  for (size_t k = 0; k < good_count; ++k) good[ranked[k]] = true;

  TrialValues values;
  for (size_t i = 0; i < space.size(); ++i) {
    const SearchParameter& p = space[i];
    Random random = stream(seed, index, i, /*purpose=*/2);
    if (p.distribution == Distribution::choice) {
      // Each choice's weight: its count among the part, plus the prior spread evenly.
      const size_t k = p.choices.size();
      std::vector<double> l(k, 1.0 / static_cast<double>(k)), g = l;
      for (size_t j = 0; j < observations.size(); ++j)
        (good[j] ? l : g)[static_cast<size_t>(observations[j].values[i])] += 1.0;
      const double l_sum = std::accumulate(l.begin(), l.end(), 0.0);
      const double g_sum = std::accumulate(g.begin(), g.end(), 0.0);
      double best_score = -INFINITY, best = 0;
      for (int c = 0; c < kTpeCandidates; ++c) {
        double u = random.uniform() * l_sum, acc = 0;
        size_t pick = k - 1;
        for (size_t m = 0; m < k; ++m)
          if ((acc += l[m]) > u) {
            pick = m;
            break;
          }
        const double score = std::log(l[pick] / l_sum) - std::log(g[pick] / g_sum);
        if (score > best_score) best_score = score, best = static_cast<double>(pick);
      }
      values.push_back(best);
      continue;
    }
    const auto [low, high] = model_range(p);
    std::vector<double> good_points, bad_points;
    for (size_t j = 0; j < observations.size(); ++j)
      (good[j] ? good_points : bad_points).push_back(to_model(p, observations[j].values[i]));
    const Parzen l = parzen(good_points, low, high), g = parzen(bad_points, low, high);
    double best_score = -INFINITY, best = 0;
    for (int c = 0; c < kTpeCandidates; ++c) {
      const double x = from_model(p, sample(l, random));
      const double m = to_model(p, x);
      const double score = log_density(l, m) - log_density(g, m);
      if (score > best_score) best_score = score, best = x;
    }
    values.push_back(best);
  }
  return values;
}

}  // namespace trainyard
