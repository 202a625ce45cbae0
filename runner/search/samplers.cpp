#include "runner/search/samplers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "reports/statistics.h"

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

// --- TPE: a Parzen estimator over all parameters at once (Optuna's multivariate TPE, its default
// since 4.x for one objective): one kernel per observation plus a prior kernel, each a product over
// the parameters — a truncated Gaussian for a number (in the space it is searched in: log for
// log_uniform; whole numbers widened by half a step each side and scored by the mass of their
// step), a distribution over the values for a choice. A branch's parameter (a conditional space)
// is modelled from the observations that had it: an observation without it lends its kernel the
// prior's for that parameter; a candidate without it (another branch chosen) is neither drawn nor
// scored on it.
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

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

// Whether parameter `d` has a value in `values`: a branch's parameter has none when another
// branch of its choice was chosen.
bool active(const std::vector<SearchParameter>& space, const TrialValues& values, size_t d) {
  const SearchParameter& p = space[d];
  return !p.conditional() || values[static_cast<size_t>(p.parent)] == static_cast<double>(p.branch);
}

struct Parzen {
  std::vector<double> weights;  // per kernel (the last: the prior), summing to 1
  // Per parameter, per kernel: a number's mean and width, or a choice's probabilities.
  std::vector<std::vector<double>> mus, sigmas;
  std::vector<std::vector<std::vector<double>>> choices;
};

// Optuna's default_weights: the same for fewer than 25; past that, the older ramp down.
std::vector<double> observation_weights(size_t n) {
  std::vector<double> w(n, 1.0);
  if (n >= 25) {
    const size_t ramp = n - 25;
    for (size_t i = 0; i < ramp; ++i)
      w[i] = ramp == 1 ? 1.0 / static_cast<double>(n)
                       : 1.0 / static_cast<double>(n) + (1.0 - 1.0 / static_cast<double>(n)) *
                                                            static_cast<double>(i) /
                                                            static_cast<double>(ramp - 1);
  }
  return w;
}

Parzen parzen(const std::vector<SearchParameter>& space,
              const std::vector<const TrialValues*>& part) {
  Parzen p;
  const size_t n = part.size(), kernels = n + 1;
  p.weights = observation_weights(n);
  p.weights.push_back(1.0);  // the prior's
  double total = 0;
  for (double w : p.weights) total += w;
  for (double& w : p.weights) w /= total;
  p.mus.resize(space.size());
  p.sigmas.resize(space.size());
  p.choices.resize(space.size());
  for (size_t d = 0; d < space.size(); ++d) {
    const SearchParameter& parameter = space[d];
    if (parameter.distribution == Distribution::choice) {
      const size_t k = parameter.choices.size();
      for (size_t j = 0; j < kernels; ++j) {
        std::vector<double> row(k, 1.0 / static_cast<double>(kernels));
        if (j < n && !std::isnan((*part[j])[d])) row[static_cast<size_t>((*part[j])[d])] += 1.0;
        double sum = 0;
        for (double v : row) sum += v;
        for (double& v : row) v /= sum;
        p.choices[d].push_back(std::move(row));
      }
      continue;
    }
    const auto [low, high] = model_range(parameter);
    std::vector<double> all_mus;  // NaN: the observation has no value for it
    for (const TrialValues* v : part) all_mus.push_back(to_model(parameter, (*v)[d]));
    std::vector<size_t> had;  // the observations with a value
    for (size_t j = 0; j < all_mus.size(); ++j)
      if (!std::isnan(all_mus[j])) had.push_back(j);
    std::vector<double> mus;
    for (size_t j : had) mus.push_back(all_mus[j]);
    const size_t count = mus.size();
    // Each observation's width: the larger distance to its neighbours, the range's ends counted
    // (the outermost: their inner neighbour's distance only), clipped to [range / min(100, 1 +
    // kernels), range].
    std::vector<size_t> order(count);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return mus[a] < mus[b]; });
    std::vector<double> with_ends = {low};
    for (size_t i : order) with_ends.push_back(mus[i]);
    with_ends.push_back(high);
    std::vector<double> sorted_sigma(count);
    for (size_t i = 0; i < count; ++i)
      sorted_sigma[i] =
          std::max(with_ends[i + 1] - with_ends[i], with_ends[i + 2] - with_ends[i + 1]);
    if (with_ends.size() >= 4) {
      sorted_sigma[0] = with_ends[2] - with_ends[1];
      sorted_sigma[count - 1] = with_ends[count] - with_ends[count - 1];
    }
    const double max_sigma = high - low;
    const double min_sigma = (high - low) / std::min(100.0, 1.0 + static_cast<double>(kernels));
    std::vector<double> sigmas(count);
    for (size_t k = 0; k < count; ++k)
      sigmas[order[k]] = std::clamp(sorted_sigma[k], min_sigma, max_sigma);
    // The prior: the range's middle, its whole width; also the kernel of an observation without
    // a value.
    p.mus[d].assign(kernels, 0.5 * (low + high));
    p.sigmas[d].assign(kernels, high - low);
    for (size_t k = 0; k < had.size(); ++k) {
      p.mus[d][had[k]] = mus[k];
      p.sigmas[d][had[k]] = sigmas[k];
    }
  }
  return p;
}

// log of the density (a whole number: the mass of its step) of kernel j at `values`.
double kernel_log_density(const Parzen& p, const std::vector<SearchParameter>& space, size_t j,
                          const TrialValues& values) {
  double total = 0;
  for (size_t d = 0; d < space.size(); ++d) {
    const SearchParameter& parameter = space[d];
    if (std::isnan(values[d])) continue;  // another branch's
    if (parameter.distribution == Distribution::choice) {
      total += std::log(std::max(p.choices[d][j][static_cast<size_t>(values[d])], 1e-300));
      continue;
    }
    const auto [low, high] = model_range(parameter);
    const double mu = p.mus[d][j], sigma = p.sigmas[d][j];
    const double mass = normal_cdf((high - mu) / sigma) - normal_cdf((low - mu) / sigma);
    const double x = to_model(parameter, values[d]);
    double density;
    if (parameter.distribution == Distribution::int_uniform)
      density = normal_cdf((x + 0.5 - mu) / sigma) - normal_cdf((x - 0.5 - mu) / sigma);
    else
      density = std::exp(-0.5 * std::pow((x - mu) / sigma, 2)) / (sigma * std::sqrt(2 * kPi));
    total += std::log(std::max(density / std::max(mass, 1e-300), 1e-300));
  }
  return total;
}

double log_density(const Parzen& p, const std::vector<SearchParameter>& space,
                   const TrialValues& values) {
  std::vector<double> terms;
  double top = -INFINITY;
  for (size_t j = 0; j < p.weights.size(); ++j) {
    terms.push_back(std::log(p.weights[j]) + kernel_log_density(p, space, j, values));
    top = std::max(top, terms.back());
  }
  double sum = 0;
  for (double t : terms) sum += std::exp(t - top);
  return top + std::log(sum);
}

TrialValues sample(const Parzen& p, const std::vector<SearchParameter>& space, Random& random) {
  double u = random.uniform(), acc = 0;
  size_t j = p.weights.size() - 1;
  for (size_t i = 0; i < p.weights.size(); ++i)
    if ((acc += p.weights[i]) > u) {
      j = i;
      break;
    }
  TrialValues values;
  for (size_t d = 0; d < space.size(); ++d) {
    const SearchParameter& parameter = space[d];
    values.push_back(NAN);  // the choice before it decides whether it has a value
    if (!active(space, values, d)) continue;
    values.pop_back();
    if (parameter.distribution == Distribution::choice) {
      const std::vector<double>& row = p.choices[d][j];
      double v = random.uniform(), c = 0;
      size_t pick = row.size() - 1;
      for (size_t m = 0; m < row.size(); ++m)
        if ((c += row[m]) > v) {
          pick = m;
          break;
        }
      values.push_back(static_cast<double>(pick));
      continue;
    }
    const auto [low, high] = model_range(parameter);
    double x = std::clamp(p.mus[d][j], low, high);
    for (int tries = 0; tries < 100; ++tries) {  // the truncated Gaussian, by rejection
      const double candidate = p.mus[d][j] + p.sigmas[d][j] * random.normal();
      if (candidate >= low && candidate <= high) {
        x = candidate;
        break;
      }
    }
    values.push_back(from_model(parameter, x));
  }
  return values;
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
    if (!active(space, values, i)) values.back() = NAN;  // another branch was chosen
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

namespace {

// TPE's step once past its random start: the finite observations split into the best gamma(n)
// and the rest, and of kTpeCandidates drawn from the good density the one with the highest ratio
// good/bad.
// Which of `observations` are the good ones: the best gamma(n) = min(ceil(n/10), 25), ties to the
// earlier trial; with two objectives, by nondomination rank, the rank that straddles gamma(n) cut
// by hypervolume contribution (each point's own area against the worst figures found + 10%).
std::vector<bool> good_observations(const std::vector<Observation>& observations, bool minimize,
                                    bool two_objectives) {
  const auto n = static_cast<int64_t>(observations.size());
  const auto good_count = static_cast<size_t>(std::min<int64_t>((n + 9) / 10, 25));
  std::vector<size_t> ranked(observations.size());
  std::iota(ranked.begin(), ranked.end(), 0);
  std::vector<bool> good(observations.size(), false);
  if (!two_objectives) {
    std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
      return better_figure(observations[a].value, observations[b].value, minimize);
    });
    for (size_t k = 0; k < good_count; ++k) good[ranked[k]] = true;
    return good;
  }
  // Both lower-is-better; a cost never reached (infinite) is worse than the worst reached.
  double worst_cost = 0;
  for (const Observation& o : observations)
    if (std::isfinite(o.cost)) worst_cost = std::max(worst_cost, o.cost);
  std::vector<std::pair<double, double>> points;
  for (const Observation& o : observations)
    points.push_back(
        {minimize ? o.value : -o.value, std::isfinite(o.cost) ? o.cost : 2 * worst_cost + 1});
  const std::vector<size_t> rank = nondomination_ranks(points);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](size_t a, size_t b) { return rank[a] < rank[b]; });
  size_t taken = 0;
  while (taken < good_count) {
    const size_t r = rank[ranked[taken]];
    std::vector<size_t> boundary;
    for (size_t k = taken; k < ranked.size() && rank[ranked[k]] == r; ++k)
      boundary.push_back(ranked[k]);
    if (taken + boundary.size() > good_count) {
      // The rank's points by first objective; each one's area up to its neighbours (the ends:
      // up to the reference point, the worst of each objective plus 10% of its span).
      double ref_x = -INFINITY, ref_y = -INFINITY, low_x = INFINITY, low_y = INFINITY;
      for (const auto& [x, y] : points) {
        ref_x = std::max(ref_x, x), ref_y = std::max(ref_y, y);
        low_x = std::min(low_x, x), low_y = std::min(low_y, y);
      }
      ref_x += 0.1 * (ref_x - low_x) + 1e-12, ref_y += 0.1 * (ref_y - low_y) + 1e-12;
      std::stable_sort(boundary.begin(), boundary.end(),
                       [&](size_t a, size_t b) { return points[a].first < points[b].first; });
      std::vector<double> area(boundary.size());
      for (size_t k = 0; k < boundary.size(); ++k) {
        const double right = k + 1 < boundary.size() ? points[boundary[k + 1]].first : ref_x;
        const double above = k > 0 ? points[boundary[k - 1]].second : ref_y;
        area[k] = (right - points[boundary[k]].first) * (above - points[boundary[k]].second);
      }
      std::vector<size_t> by_area(boundary.size());
      std::iota(by_area.begin(), by_area.end(), 0);
      std::stable_sort(by_area.begin(), by_area.end(), [&](size_t a, size_t b) {
        return area[a] > area[b] || (area[a] == area[b] && boundary[a] < boundary[b]);
      });
      for (size_t k = 0; taken < good_count; ++k, ++taken) good[boundary[by_area[k]]] = true;
      break;
    }
    for (size_t i : boundary) good[i] = true;
    taken += boundary.size();
  }
  return good;
}

TrialValues tpe_candidate(const std::vector<SearchParameter>& space,
                          const std::vector<Observation>& observations, bool minimize,
                          bool two_objectives, Random random) {
  // The good part (l) and the bad (g), each in trial order (the oldest first: Optuna's weights
  // ramp them down).
  const std::vector<bool> good = good_observations(observations, minimize, two_objectives);
  std::vector<const TrialValues*> good_part, bad_part;
  for (size_t j = 0; j < observations.size(); ++j)
    (good[j] ? good_part : bad_part).push_back(&observations[j].values);
  const Parzen l = parzen(space, good_part), g = parzen(space, bad_part);
  TrialValues best;
  double best_score = -INFINITY;
  for (int c = 0; c < kTpeCandidates; ++c) {
    TrialValues candidate = sample(l, space, random);
    const double score = log_density(l, space, candidate) - log_density(g, space, candidate);
    if (score > best_score) best_score = score, best = std::move(candidate);
  }
  return best;
}

// The parameters `dims` of `space` as a space of their own (no longer any branch's), and each
// observation's values for them.
std::vector<SearchParameter> subspace(const std::vector<SearchParameter>& space,
                                      const std::vector<size_t>& dims) {
  std::vector<SearchParameter> out;
  for (size_t d : dims) {
    out.push_back(space[d]);
    out.back().parent = -1;
  }
  return out;
}
Observation projected(const Observation& o, const std::vector<size_t>& dims) {
  Observation out{.values = {}, .value = o.value, .cost = o.cost};
  for (size_t d : dims) out.values.push_back(o.values[d]);
  return out;
}

}  // namespace

TrialValues propose_tpe(const std::vector<SearchParameter>& space, uint64_t seed, int64_t index,
                        const std::vector<Observation>& all, bool minimize, bool two_objectives) {
  // A failed trial tells nothing about where the good settings are (as Optuna, which leaves FAIL
  // trials out): only the finite figures count, for the start and the split.
  std::vector<Observation> observations;
  for (const Observation& o : all)
    if (std::isfinite(o.value)) observations.push_back(o);
  const auto n = static_cast<int64_t>(observations.size());
  if (n < kStartupTrials) return propose_random(space, seed, index);
  if (!is_conditional(space))
    return tpe_candidate(space, observations, minimize, two_objectives,
                         stream(seed, index, 0, /*purpose=*/2));
  // A conditional space, in groups as Optuna's TPE with group=True: first the parameters every
  // trial has (the choices among them) from every trial; then the chosen branch's parameters
  // from the trials that chose that branch, split into good and bad among themselves (a branch
  // chosen fewer than twice yet: drawn from its priors).
  std::vector<size_t> common;
  for (size_t d = 0; d < space.size(); ++d)
    if (!space[d].conditional()) common.push_back(d);
  std::vector<Observation> seen;
  for (const Observation& o : observations) seen.push_back(projected(o, common));
  const TrialValues top = tpe_candidate(subspace(space, common), seen, minimize, two_objectives,
                                        stream(seed, index, 0, 2));
  TrialValues values(space.size(), NAN);
  for (size_t k = 0; k < common.size(); ++k) values[common[k]] = top[k];
  for (size_t choice : common) {
    std::vector<size_t> branch;  // the chosen branch's parameters
    for (size_t d = 0; d < space.size(); ++d)
      if (space[d].parent == static_cast<int>(choice) &&
          static_cast<double>(space[d].branch) == values[choice])
        branch.push_back(d);
    if (branch.empty()) continue;
    std::vector<Observation> chose;
    for (const Observation& o : observations)
      if (o.values[choice] == values[choice]) chose.push_back(projected(o, branch));
    TrialValues drawn;
    if (chose.size() < 2) {
      for (size_t d : branch)
        drawn.push_back(from_unit(space[d], stream(seed, index, d, 1).uniform()));
    } else {
      drawn = tpe_candidate(subspace(space, branch), chose, minimize, two_objectives,
                            stream(seed, index, choice + 1, /*purpose=*/3));
    }
    for (size_t k = 0; k < branch.size(); ++k) values[branch[k]] = drawn[k];
  }
  return values;
}

}  // namespace trainyard
